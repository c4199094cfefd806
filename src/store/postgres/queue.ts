import { writingJson } from "../errors.js";
import type { RunQueue } from "../store.js";
import { toStoreError } from "./errors.js";
import type { Sql } from "./open.js";
import { cancelRun } from "./queue/cancel-run.js";
import { claimRuns } from "./queue/claim-runs.js";
import { heartbeatRuns } from "./queue/heartbeat-runs.js";
import { insertRuns } from "./queue/insert-runs.js";
import { nextLeaseExpiry } from "./queue/next-lease-expiry.js";
import { releaseRuns } from "./queue/release-runs.js";
import { groupedWrites, stateWrite } from "./queue/write-runs.js";

const mapped = <T>(p: Promise<T>): Promise<T> =>
  p.catch((err: unknown) => {
    throw toStoreError(err);
  });

// The run queue on PostgreSQL, shared by every replica: one module per
// operation under ./queue (docs/architecture.md describes them one by one).
// Claimers never wait for each other's runs (FOR UPDATE SKIP LOCKED) and
// never take a run twice; everything a worker writes while it runs a run is
// conditional on its lease_owner. What the writes signal, to this process
// and the other replicas, is the store's signalled wrapper's (../signalled.ts).
export function createPgRunQueue(sql: Sql): RunQueue {
  const write = groupedWrites(sql);
  return {
    claim: (owner, limit, leaseMs, maxAttempts, now, executing) => mapped(claimRuns(sql, { owner, limit, leaseMs, maxAttempts, now, executing })),
    heartbeat: (owner, ids, leaseMs, now) => mapped(heartbeatRuns(sql, owner, ids, now + leaseMs)),
    recordSteps: (owner, id, steps, now) => writingJson((json) => mapped(write(stateWrite(json, id, owner, now, steps)))),
    finish: (owner, id, o, now) =>
      writingJson((json) => mapped(write(stateWrite(json, id, owner, now, o.steps, { status: o.status, output: o.output, error: o.error })))),
    release: (owner, ids, now) => mapped(releaseRuns(sql, owner, ids, now)),
    cancel: (tenantId, id, now) => mapped(cancelRun(sql, tenantId, id, now)),
    nextLeaseExpiry: () => mapped(nextLeaseExpiry(sql)),
    insertMany: (rows, maxQueued = Infinity) => mapped(insertRuns(sql, rows, maxQueued)),
  };
}
