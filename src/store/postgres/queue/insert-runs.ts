import type { RunInsert } from "../../rows.js";
import type { Sql } from "../open.js";
import { holdQueuedCounts, queueRuns } from "../runs.js";

// Queues runs of one tenant, unless its queued runs would then pass
// `maxQueued`: counted holding the tenant's count (which schedules and
// ingestion hold too), so every replica counts and inserts a tenant's runs
// one transaction at a time.
export async function insertRuns(sql: Sql, rows: RunInsert[], maxQueued: number): Promise<boolean> {
  if (!rows.length) return true;
  return sql.begin(async (tx) => {
    if (maxQueued !== Infinity) {
      const tenantId = rows[0]!.tenantId;
      const counts = await holdQueuedCounts(tx, [tenantId]);
      if (counts.get(tenantId)! + rows.length > maxQueued) return false;
    }
    await queueRuns(tx, rows);
    return true;
  });
}
