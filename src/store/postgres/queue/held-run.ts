// A held run's statements (heartbeat, step records and finish, release) find
// it by id and check that it is still running. The status goes in as a bound
// parameter, not as the literal 'running': the queue pool's generic plans
// (../open.ts) are made without parameter values, and a parameter proves no
// partial index's predicate, so the only index that serves is the primary
// key. With the literal, the planner could take runs_status or runs_changes
// (partial on the runs that left the queue, neither led by the id): nearly
// empty when a drain's first writes were planned, beside 50,000 queued runs,
// and then walked whole at every write as runs ended
// (test/queue-cost.test.ts; bench/README, the engine's drain of 50,000).
export const RUNNING = "running";
