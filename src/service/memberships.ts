import { create } from "@bufbuild/protobuf";
import { Role } from "../../gen/platform/v1/common_pb.js";
import { MembershipSchema, type Membership } from "../../gen/platform/v1/tenant_pb.js";
import type { Principal } from "../integrations/identity/index.js";
import type { TenantRow } from "../store/rows.js";
import { PLATFORM_ADMIN_SCOPE, type RoleName } from "./access.js";
import type { PlatformHandlers, ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";
import { isSlug } from "./validate.js";

const ROLES = { admin: Role.ADMIN, viewer: Role.VIEWER } as const;

function membershipMessage(tenant: TenantRow, role: RoleName | undefined): Membership {
  return create(MembershipSchema, { tenant: tenant.slug, displayName: tenant.displayName, role: role ? ROLES[role] : Role.UNSPECIFIED });
}

// The caller's own tenants (the console's tenant switcher), newest tenant
// first, paged by the tenant id. Which tenants are the ones `authorize` would
// let the caller select: under the control plane those of its Member rows;
// in claim mode the one its claim names. A platform admin is shown every
// tenant, with its Member row's role, else no role (ROLE_UNSPECIFIED): without
// a row it may only manage the tenant's members (the bootstrap of its admins),
// so the console must not offer it the tenant's write controls.
export function membershipHandlers({ store, roles }: ServiceDeps) {
  // Claim mode: the claimed tenant, if it exists, with the role its claim
  // and scopes make. One item, so never a next page.
  async function claimed(principal: Principal, slug: string, beforeId: string | undefined): Promise<Membership[]> {
    if (!isSlug(slug)) return [];
    const tenant = await store.tenants.get(slug);
    if (!tenant || tenant.slug !== slug || (beforeId !== undefined && tenant.id >= beforeId)) return [];
    const role = await roles.roleIn(principal, tenant.id);
    return role ? [membershipMessage(tenant, role)] : [];
  }

  return {
    async listMemberships(req, { principal }) {
      const q = pageQuery(req);
      const claim = roles.claimedSlug(principal);
      const everyTenant = principal.scopes.has(PLATFORM_ADMIN_SCOPE);
      if (claim !== undefined && !everyTenant) return { memberships: await claimed(principal, claim, q.beforeId), nextPageToken: "" };
      const rows = await store.members
        .memberships(principal.subject, { limit: q.limit, beforeTenantId: q.beforeId, everyTenant });
      const { items, nextPageToken } = page(
        rows.map((r) => ({ id: r.tenant.id, ...r })),
        q.limit,
      );
      const memberships: Membership[] = [];
      for (const { tenant, role } of items) {
        // A platform admin in claim mode, without a row in its claimed tenant:
        // the role the claim gives it there.
        const claimedRole = !role && tenant.slug === claim ? await roles.roleIn(principal, tenant.id) : undefined;
        memberships.push(membershipMessage(tenant, role ?? claimedRole));
      }
      return { memberships, nextPageToken };
    },
  } satisfies Partial<PlatformHandlers>;
}
