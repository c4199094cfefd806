// A held run's statements (heartbeat, step records and finish, release) find
// it by id and check that it is still running. The status goes in as a bound
// parameter, not as the literal 'running': the queue pool's generic plans
// (../open.ts) are made without parameter values, and a parameter proves no
// partial index's predicate, so the only index that serves is the primary
// key. With the literal, a plan made while few runs ran could take
// runs_leases or runs_running and walk every running run at each write; and
// before runs_status and runs_changes left running runs out (../../
// run-conditions.ts), it took those and walked every run that had ended
// (test/queue-cost.test.ts; bench/README, the engine's drain of 50,000).
export const RUNNING = "running";
