import type { RunRow } from "../../rows.js";
import type { Sql } from "../open.js";
import { toRow, type PgRun } from "./run-row.js";

// Cancels a queued or running run of the tenant. Conditional: a run that
// finished meanwhile is not turned into cancelled.
export async function cancelRun(sql: Sql, tenantId: string, id: string, now: number): Promise<RunRow | undefined> {
  const [row] = await sql<PgRun[]>`
    update runs set status = 'cancelled', end_time = ${now}, lease_owner = null, lease_expire_time = null, update_time = ${now}
    where tenant_id = ${tenantId} and id = ${id} and status in ('queued', 'running')
    returning *`;
  return row && toRow(row);
}
