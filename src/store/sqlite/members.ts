import type Database from "better-sqlite3";
import type { MemberRow, TenantRow } from "../rows.js";
import { run } from "./errors.js";
import type { MemberChange, MemberChangeResult, MembershipQuery, MembershipRow } from "../store.js";

// Column names as the Drizzle row shape uses them.
const SELECT = `id, tenant_id as tenantId, subject, role, create_time as createTime, update_time as updateTime`;

// Removing or demoting a member, refused when it would leave the tenant
// without an admin. One immediate transaction holds the write lock from the
// count to the write, so two admins demoting each other cannot both succeed.
export function createSqliteMemberChange(raw: Database.Database) {
  const get = raw.prepare<[string, string], MemberRow>(`select ${SELECT} from members where tenant_id = ? and id = ?`);
  const admins = raw.prepare<[string], number>(`select count(*) from members where tenant_id = ? and role = 'admin'`).pluck(true);
  const remove = raw.prepare<[string, string]>(`delete from members where tenant_id = ? and id = ?`);
  const setRole = raw.prepare<[string, number, string, string], MemberRow>(
    `update members set role = ?, update_time = ? where tenant_id = ? and id = ? returning ${SELECT}`,
  );
  const changeTx = raw.transaction((tenantId: string, id: string, change: MemberChange): MemberChangeResult => {
    const row = get.get(tenantId, id);
    if (!row) return { outcome: "not_found" };
    const losesAdmin = row.role === "admin" && (change.remove || change.role !== "admin");
    if (losesAdmin && admins.get(tenantId)! <= 1) return { outcome: "last_admin" };
    if (change.remove) {
      remove.run(tenantId, id);
      return { outcome: "done", row };
    }
    return { outcome: "done", row: setRole.get(change.role, change.updateTime, tenantId, id)! };
  });
  return (tenantId: string, id: string, change: MemberChange) => run(() => changeTx.immediate(tenantId, id, change));
}

const TENANT = `tenants.id as id, tenants.slug as slug, tenants.display_name as displayName,
  tenants.create_time as createTime, tenants.update_time as updateTime`;

// A subject's tenants, newest first. Through its Member rows: the
// (subject, tenant_id) index gives them in order. Every tenant: the tenants'
// primary key in order, each joined to the subject's row by the
// (tenant_id, subject) index.
export function createSqliteMemberships(raw: Database.Database) {
  type Row = TenantRow & { role: MemberRow["role"] | null };
  const statements = new Map<string, Database.Statement<unknown[], Row>>();
  const statement = (everyTenant: boolean, before: boolean) => {
    const key = `${everyTenant}:${before}`;
    let stmt = statements.get(key);
    if (!stmt) {
      const sql = everyTenant
        ? `select ${TENANT}, members.role as role from tenants
           left join members on members.tenant_id = tenants.id and members.subject = ?
           ${before ? "where tenants.id < ?" : ""} order by tenants.id desc limit ?`
        : `select ${TENANT}, members.role as role from members join tenants on tenants.id = members.tenant_id
           where members.subject = ? ${before ? "and members.tenant_id < ?" : ""} order by members.tenant_id desc limit ?`;
      stmt = raw.prepare<unknown[], Row>(sql);
      statements.set(key, stmt);
    }
    return stmt;
  };
  return (subject: string, query: MembershipQuery): Promise<MembershipRow[]> =>
    run(() => {
      const params: unknown[] = [subject, ...(query.beforeTenantId ? [query.beforeTenantId] : []), query.limit];
      return statement(query.everyTenant === true, query.beforeTenantId !== undefined)
        .all(...params)
        .map(({ role, ...tenant }) => ({ tenant, role }));
    });
}
