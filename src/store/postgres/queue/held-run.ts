// Statements that find runs by id (a held run's heartbeat, step records and
// finish, release; a cancel) are planned at each execution
// (./planned-each-time.ts), not kept with the claim's plans for the
// connection's life (../open.ts): kept, a plan made on an empty table walked
// runs_agent (the id its third column) for the heartbeat and the release,
// and runs_event (the tenant its second) for the cancel, at each call once
// the table had grown: 930 pages at 150,000 runs (test/queue-cost.test.ts).
//
// They check that the run is still running with the status as a bound
// parameter, not the literal 'running': a generic plan is made without
// parameter values, and a parameter proves no partial index's predicate, so
// neither runs_leases nor runs_running (every running run) is walked in
// place of the primary key; and before runs_status and runs_changes left
// running runs out (../../run-conditions.ts), neither was every run that had
// ended.
export const RUNNING = "running";
