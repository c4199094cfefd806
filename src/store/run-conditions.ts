// Conditions on runs that partial indexes of both engines' schemas hold, in
// the words each query that must use one of those indexes repeats: SQLite
// takes a partial index only for a query that states its condition term for
// term, PostgreSQL for one whose conditions prove it.
//
// None of them is proven by status = 'running': a plan for the running runs
// (the claim's counts, expired leases) can take only runs_leases or
// runs_running, which hold the running runs alone, never an index of every
// run that ended (queue-cost.test.ts).

// The runs that ended: runs_status, runs_end_time, retention.
export const RUN_ENDED = "status in ('succeeded', 'failed', 'cancelled', 'timed_out')";

// The runs that ended or changed since they were queued: runs_changes.
export const RUN_CHANGED = `${RUN_ENDED} or update_time <> create_time`;
