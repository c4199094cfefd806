// Statements that find runs by id (a held run's heartbeat, step records and
// finish, release; a cancel) are planned at each execution, not kept as the
// queue pool's prepared statements with one plan for the connection's life
// (../open.ts). Their plan depends on the table's size: on an empty or nearly
// empty table, a walk of a whole index that holds the id as a later column
// (runs_agent, runs_event) costs no more than a probe of the primary key per
// id, and the planner took it; kept, that plan walked every run at each write
// once the table had grown, 900 pages at 150,000 runs
// (test/queue-cost.test.ts). A plan is remade whenever anything invalidates
// it (another database dropped or a flood of catalog changes elsewhere on
// the server resets every backend's caches), so when it was made was not
// ours to choose. Planned at each execution, a plan is made for the table as
// it is: a generic plan of one of these statements plans in about 0.1 ms.
export const PLANNED_EACH_TIME = { prepare: false } as const;

// They check that the run is still running with the status as a bound
// parameter, not the literal 'running': a generic plan is made without
// parameter values, and a parameter proves no partial index's predicate, so
// neither runs_leases nor runs_running (every running run) is walked in
// place of the primary key; and before runs_status and runs_changes left
// running runs out (../../run-conditions.ts), neither was every run that had
// ended.
export const RUNNING = "running";
