import type { Sql } from "../open.js";
import { RUNNING } from "./held-run.js";

// Gives runs the owner holds back to the queue (graceful shutdown),
// refunding their attempt.
export async function releaseRuns(sql: Sql, owner: string, ids: string[], now: number): Promise<void> {
  await sql`
    update runs set status = 'queued', lease_owner = null, lease_expire_time = null, attempt = greatest(attempt - 1, 0),
      start_time = null, update_time = ${now}
    where id = any(${ids}::text[]) and lease_owner = ${owner} and status = ${RUNNING}`;
}
