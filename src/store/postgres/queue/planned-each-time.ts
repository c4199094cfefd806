// Options of a statement on the run queue's pool sent unnamed, not kept as a
// prepared statement: it is planned at each execution (a generic plan, see
// openQueuePool in ../open.ts) for the tables as they are. A prepared
// statement there keeps one plan for the connection's life, made wherever
// the connection was then: made on an empty or nearly empty table (a new
// deployment, or any moment at which another database's drop reset every
// backend's caches), a plan of a statement by id walked a whole index that
// holds the id second, and went on walking it as the table grew. The main
// pool needs no such option: every statement there is planned at each
// execution (openPostgres, ../open.ts). Planning one costs about 0.1 ms
// (test/queue-cost.test.ts).
export const PLANNED_EACH_TIME = { prepare: false } as const;
