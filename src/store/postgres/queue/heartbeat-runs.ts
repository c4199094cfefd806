import type { Sql } from "../open.js";
import { RUNNING } from "./held-run.js";

// Extends the leases the owner still holds; the ids it holds. Lease
// bookkeeping, not a change of the run: update_time stays, and no stream wakes.
export async function heartbeatRuns(sql: Sql, owner: string, ids: string[], until: number): Promise<Set<string>> {
  const rows = await sql<{ id: string }[]>`
    update runs set lease_expire_time = ${until}
    where id = any(${ids}::text[]) and lease_owner = ${owner} and status = ${RUNNING}
    returning id`;
  return new Set(rows.map((r) => r.id));
}
