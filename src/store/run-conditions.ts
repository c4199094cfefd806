// Conditions on runs that partial indexes of both engines' schemas hold, in
// the words each query that must use one of those indexes repeats: SQLite
// takes a partial index only for a query that states its condition term for
// term, PostgreSQL for one whose conditions prove it.
//
// None of them is proven by status = 'running' but those of the indexes of
// running runs alone: a plan for the running runs (the claim's counts,
// expired leases) can take only runs_leases or runs_running, never an index
// of every run that ended (queue-cost.test.ts).
import { RUN_STATUSES, type RunStatus } from "./types.js";

const ENDED_STATUSES = RUN_STATUSES.filter((s) => s !== "queued" && s !== "running");

// The runs that ended: runs_status, runs_end_time, retention.
export const RUN_ENDED = `status in (${ENDED_STATUSES.map((s) => `'${s}'`).join(", ")})`;

// The runs that ended or changed since they were queued: runs_changes.
export const RUN_CHANGED = `${RUN_ENDED} or update_time <> create_time`;

// The runs of one status, on the index that holds them in id order for a
// tenant: runs_queued and runs_running (tenant_id, id), runs_status
// (tenant_id, status, id).
export const runStatusCondition = (status: RunStatus): string =>
  status === "queued" || status === "running" ? `status = '${status}'` : `status = '${status}' and ${RUN_ENDED}`;

// Each of a tenant's runs is in one of these ranges, so a read of all of a
// tenant's runs by id reads each (RUN_LIST_SPLIT in list-query.ts, the
// overview's run rows): no index holds every run of a tenant by id.
export const RUN_GROUPS: readonly string[] = RUN_STATUSES.map(runStatusCondition);
