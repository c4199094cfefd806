import type { Sql } from "../open.js";
import { PLANNED_EACH_TIME } from "./planned-each-time.js";
import { RUNNING } from "./held-run.js";

const HEARTBEAT = `
  update runs set lease_expire_time = $1
  where id = any($2::text[]) and lease_owner = $3 and status = $4
  returning id`;

// Extends the leases the owner still holds; the ids it holds. Lease
// bookkeeping, not a change of the run: update_time stays, and no stream wakes.
export async function heartbeatRuns(sql: Sql, owner: string, ids: string[], until: number): Promise<Set<string>> {
  const rows = await sql.unsafe<{ id: string }[]>(HEARTBEAT, [until, ids, owner, RUNNING], PLANNED_EACH_TIME);
  return new Set(rows.map((r) => r.id));
}
