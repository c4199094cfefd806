import type { RunRow } from "../../rows.js";
import type { Sql } from "../open.js";
import { PLANNED_EACH_TIME } from "./planned-each-time.js";
import { toRow, type PgRun } from "./run-row.js";

const CANCEL = `
  update runs set status = 'cancelled', end_time = $1, lease_owner = null, lease_expire_time = null, update_time = $1
  where tenant_id = $2 and id = $3 and status in ('queued', 'running')
  returning *`;

// Cancels a queued or running run of the tenant. Conditional: a run that
// finished meanwhile is not turned into cancelled.
export async function cancelRun(sql: Sql, tenantId: string, id: string, now: number): Promise<RunRow | undefined> {
  const [row] = await sql.unsafe<PgRun[]>(CANCEL, [now, tenantId, id], PLANNED_EACH_TIME);
  return row && toRow(row);
}
