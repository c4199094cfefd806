import { and, count, eq } from "drizzle-orm";
import type { MemberRow, TenantRow } from "../rows.js";
import { within } from "./deadline.js";
import { pg } from "./errors.js";
import { lockTenantScope } from "./locks.js";
import type { Db, Sql } from "./open.js";
import { members } from "./schema.js";
import type { MemberChange, MemberChangeResult, MembershipQuery, MembershipRow } from "../store.js";

// Removing or demoting a member, refused when it would leave the tenant
// without an admin. The count and the write hold the tenant's members lock
// (the one member inserts take), so two admins demoting each other on two
// replicas cannot both succeed.
export function createPgMemberChange(db: Db) {
  return (tenantId: string, id: string, change: MemberChange): Promise<MemberChangeResult> =>
    pg(() =>
      db.transaction(async (tx): Promise<MemberChangeResult> => {
        await lockTenantScope(tx, "members", tenantId);
        const byId = and(eq(members.tenantId, tenantId), eq(members.id, id));
        const [row] = await tx.select().from(members).where(byId);
        if (!row) return { outcome: "not_found" };
        const losesAdmin = row.role === "admin" && (change.remove || change.role !== "admin");
        if (losesAdmin) {
          const [{ admins }] = (await tx
            .select({ admins: count() })
            .from(members)
            .where(and(eq(members.tenantId, tenantId), eq(members.role, "admin")))) as [{ admins: number }];
          if (admins <= 1) return { outcome: "last_admin" };
        }
        if (change.remove) {
          await tx.delete(members).where(byId);
          return { outcome: "done", row };
        }
        const [updated] = await tx.update(members).set({ role: change.role, updateTime: change.updateTime }).where(byId).returning();
        return { outcome: "done", row: updated! };
      }),
    );
}

const TENANT = `tenants.id as "id", tenants.slug as "slug", tenants.display_name as "displayName",
  tenants.create_time as "createTime", tenants.update_time as "updateTime"`;

// A subject's tenants, newest first (ordered by the tenants' C-collated id,
// as in SQLite). Through its Member rows: found by the (subject, tenant_id)
// index, then sorted, few as a subject's memberships are. Every tenant: the
// tenants' primary key in order, each joined to the subject's row by the
// (tenant_id, subject) index, compared in that index's collation: in the
// tenants' "C" one the index could not answer it, and each tenant of the
// page read every membership of the subject (an operator in 10,000 tenants:
// test/queue-cost.test.ts).
export function createPgMemberships(sql: Sql, timeoutMs: number) {
  type Row = TenantRow & { role: MemberRow["role"] | null };
  const text = (everyTenant: boolean, before: boolean) =>
    everyTenant
      ? `select ${TENANT}, members.role as "role" from tenants
         left join members on members.tenant_id = tenants.id collate "default" and members.subject = $1
         ${before ? "where tenants.id < $2" : ""} order by tenants.id desc limit ${before ? "$3" : "$2"}`
      : `select ${TENANT}, members.role as "role" from members join tenants on tenants.id = members.tenant_id
         where members.subject = $1 ${before ? "and tenants.id < $2" : ""} order by tenants.id desc limit ${before ? "$3" : "$2"}`;
  return (subject: string, query: MembershipQuery): Promise<MembershipRow[]> =>
    pg(async () => {
      const before = query.beforeTenantId !== undefined;
      const params = [subject, ...(before ? [query.beforeTenantId!] : []), query.limit];
      const rows = await within(sql.unsafe<Row[]>(text(query.everyTenant === true, before), params, { prepare: true }), timeoutMs);
      return rows.map(({ role, ...tenant }) => ({ tenant, role }));
    });
}
