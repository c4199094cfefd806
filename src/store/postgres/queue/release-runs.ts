import type { Sql } from "../open.js";
import { PLANNED_EACH_TIME } from "./planned-each-time.js";
import { RUNNING } from "./held-run.js";

const RELEASE = `
  update runs set status = 'queued', lease_owner = null, lease_expire_time = null, attempt = greatest(attempt - 1, 0),
    start_time = null, update_time = $1
  where id = any($2::text[]) and lease_owner = $3 and status = $4`;

// Gives runs the owner holds back to the queue (graceful shutdown),
// refunding their attempt.
export async function releaseRuns(sql: Sql, owner: string, ids: string[], now: number): Promise<void> {
  await sql.unsafe(RELEASE, [now, ids, owner, RUNNING], PLANNED_EACH_TIME);
}
