import { create } from "@bufbuild/protobuf";
import { Role } from "../../gen/platform/v1/common_pb.js";
import { MemberSchema, type Member } from "../../gen/platform/v1/tenant_pb.js";
import { newId } from "../lib/ids.js";
import type { MemberRow } from "../store/rows.js";
import type { RoleName } from "./access.js";
import { failedPrecondition, invalidArgument, notFound } from "./errors.js";
import { applyUpdateMask } from "./field-mask.js";
import { tenantOf, times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";
import { MAX_LENGTH } from "./limits.js";
import { insertWithinQuota } from "./quotas.js";
import { requireText } from "./validate.js";

const ROLE_NAMES = { [Role.ADMIN]: "admin", [Role.VIEWER]: "viewer" } as const;

function roleName(role: Role): RoleName {
  if (role === Role.ADMIN || role === Role.VIEWER) return ROLE_NAMES[role];
  throw invalidArgument("member.role", "must be ROLE_ADMIN or ROLE_VIEWER");
}

// A new member's fields, checked without the store (see newTenantFields).
export function newMemberFields(member: { subject: string; role: Role } | undefined) {
  return {
    subject: requireText("member.subject", member?.subject ?? "", MAX_LENGTH.subject),
    role: roleName(member?.role ?? Role.UNSPECIFIED),
  };
}

function memberMessage(row: MemberRow, tenant: string): Member {
  return create(MemberSchema, {
    id: row.id,
    tenant,
    subject: row.subject,
    role: row.role === "admin" ? Role.ADMIN : Role.VIEWER,
    ...times(row),
  });
}

const lastAdmin = (id: string, tenant: string, action: string) =>
  failedPrecondition(`member "${id}" is the last admin of tenant "${tenant}"; add another admin before ${action} it`);

export function memberHandlers({ store, now, quotas }: ServiceDeps) {
  return {
    async listMembers(req, call) {
      const tenant = tenantOf(call);
      const q = pageQuery(req);
      const rows = await store.members.list(tenant.id, q);
      const { items, nextPageToken } = page(rows, q.limit);
      return { members: items.map((r) => memberMessage(r, tenant.slug)), nextPageToken };
    },
    async addMember({ member }, call) {
      const tenant = tenantOf(call);
      const { subject, role } = newMemberFields(member);
      const t = now();
      const row = await insertWithinQuota(
        store.members,
        { id: newId("mem"), tenantId: tenant.id, subject, role, createTime: t, updateTime: t },
        tenant,
        quotas,
        "members",
        `"${subject}" is already a member of tenant "${tenant.slug}"`,
      );
      return { member: memberMessage(row, tenant.slug) };
    },
    async updateMember({ member, updateMask }, call) {
      const tenant = tenantOf(call);
      if (!member?.id) throw invalidArgument("member.id", "is required");
      const row = await store.members.get(tenant.id, member.id);
      if (!row) throw notFound("member", member.id);
      const { merged } = applyUpdateMask(MemberSchema, memberMessage(row, tenant.slug), member, updateMask, ["role"]);
      const result = await store.members
        .change(tenant.id, row.id, { role: roleName(merged.role), updateTime: now() });
      if (result.outcome === "not_found") throw notFound("member", member.id);
      if (result.outcome === "last_admin") throw lastAdmin(member.id, tenant.slug, "demoting");
      return { member: memberMessage(result.row, tenant.slug) };
    },
    async removeMember({ id }, call) {
      const tenant = tenantOf(call);
      const result = await store.members.change(tenant.id, id, { remove: true });
      if (result.outcome === "not_found") throw notFound("member", id);
      if (result.outcome === "last_admin") throw lastAdmin(id, tenant.slug, "removing");
      return {};
    },
  } satisfies Partial<PlatformHandlers>;
}
