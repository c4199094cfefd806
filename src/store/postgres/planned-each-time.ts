// Options of a statement sent unnamed, not kept as a prepared statement: it
// is planned at each execution, for the tables as they are (on the main pool
// for its values, a custom plan; on the queue pool a generic one, see
// ./open.ts). A prepared statement keeps a plan for the connection's life,
// made wherever the connection was then: on the main pool a generic plan once
// five custom ones cost no less, which on an empty or nearly empty table
// (a new deployment, whose console polls its empty lists) walks a whole
// index that holds the wanted column second, and goes on walking it as the
// table grows; and a plan is remade at whatever moment something invalidates
// it (another database dropped on the same server resets every backend's
// caches). Statements whose best plan depends on the size of a table that
// grows without bound (runs, events) use these; planning one costs about
// 0.1 ms (test/queue-cost.test.ts).
export const PLANNED_EACH_TIME = { prepare: false } as const;
