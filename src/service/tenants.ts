import { create } from "@bufbuild/protobuf";
import { TenantSchema, type Tenant } from "../../gen/platform/v1/tenant_pb.js";
import { newId } from "../lib/ids.js";
import type { TenantRow } from "../store/rows.js";
import { invalidArgument, notFound, onConflict } from "./errors.js";
import { applyUpdateMask } from "./field-mask.js";
import { times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";
import { MAX_LENGTH } from "./limits.js";
import { isSlug, optionalText } from "./validate.js";

function tenantMessage(row: TenantRow): Tenant {
  return create(TenantSchema, { id: row.id, slug: row.slug, displayName: row.displayName, ...times(row) });
}

// A new tenant's fields, checked without the store (the CLI checks them
// before it opens, or creates, a database).
export function newTenantFields(tenant: { slug: string; displayName: string } | undefined) {
  const slug = tenant?.slug ?? "";
  if (!isSlug(slug)) throw invalidArgument("tenant.slug", "must match ^[a-z][a-z0-9-]{1,62}$");
  return { slug, displayName: optionalText("tenant.display_name", tenant?.displayName ?? "", MAX_LENGTH.displayName) };
}

export function tenantHandlers({ store, now }: ServiceDeps) {
  async function find(id: string): Promise<TenantRow> {
    const row = await store.tenants.get(id);
    if (!row) throw notFound("tenant", id);
    return row;
  }

  return {
    async createTenant({ tenant }) {
      const { slug, displayName } = newTenantFields(tenant);
      const t = now();
      const row = await store.tenants
        .insert({
          id: newId("ten"),
          slug,
          displayName,
          createTime: t,
          updateTime: t,
        })
        .catch(onConflict(`tenant "${slug}" already exists`));
      return { tenant: tenantMessage(row) };
    },
    async listTenants(req) {
      const q = pageQuery(req);
      const rows = await store.tenants.list(q);
      const { items, nextPageToken } = page(rows, q.limit);
      return { tenants: items.map(tenantMessage), nextPageToken };
    },
    async getTenant({ id }) {
      return { tenant: tenantMessage(await find(id)) };
    },
    async updateTenant({ tenant, updateMask }) {
      if (!tenant?.id) throw invalidArgument("tenant.id", "is required");
      const row = await find(tenant.id);
      const { merged } = applyUpdateMask(TenantSchema, tenantMessage(row), tenant, updateMask, ["display_name"]);
      const updated = await store.tenants
        .update(row.id, { displayName: optionalText("tenant.display_name", merged.displayName, MAX_LENGTH.displayName), updateTime: now() });
      if (!updated) throw notFound("tenant", tenant.id);
      return { tenant: tenantMessage(updated) };
    },
  } satisfies Partial<PlatformHandlers>;
}
