import type { RunInsert } from "../../rows.js";
import { lockTenantScope } from "../locks.js";
import type { Sql } from "../open.js";
import { queuedCount, queueRuns } from "../runs.js";

// Queues runs of one tenant, unless its queued runs would then pass
// `maxQueued`: counted after the tenant's queued-runs lock (which schedules
// and ingestion take too), so every replica counts and inserts a tenant's
// runs one transaction at a time.
export async function insertRuns(sql: Sql, rows: RunInsert[], maxQueued: number): Promise<boolean> {
  if (!rows.length) return true;
  return sql.begin(async (tx) => {
    if (maxQueued !== Infinity) {
      const tenantId = rows[0]!.tenantId;
      await lockTenantScope(tx, "queued_runs", tenantId);
      if ((await queuedCount(tx, tenantId)) + rows.length > maxQueued) return false;
    }
    await queueRuns(tx, rows);
    return true;
  });
}
