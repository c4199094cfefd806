import type Database from "better-sqlite3";
import type { MemberRow } from "../rows.js";
import { run } from "./errors.js";
import type { MemberChange, MemberChangeResult } from "../store.js";

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
