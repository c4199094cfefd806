import { join } from "node:path";
import postgres from "postgres";
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { projectRoot } from "../../lib/project-root.js";
import * as schema from "./schema.js";

export type Sql = postgres.Sql;
export type Db = PostgresJsDatabase<typeof schema>;

export interface PostgresOptions {
  // postgres://user:password@host:port/database
  url: string;
  // Connections of this process's pool (LISTEN takes one more of its own).
  poolSize?: number;
}

export interface OpenedPostgres {
  sql: Sql;
  db: Db;
}

// Seconds before a connection is tried again after a failed one. The
// driver's own backoff grows with every failure of any connection of the pool
// (3^n / 100 s, up to 20 s), so an outage of a few seconds with a busy pool
// left a replica without connections for many seconds after the database was
// back. Here it grows to a quarter second at most: attempts are cheap (a
// refused connection, or an answer that the database is starting up), and a
// replica is back within that of the database.
function reconnectBackoff(failures: number): number {
  return Math.min(0.25, 0.01 * 2 ** failures) * (0.5 + Math.random() / 2);
}

// bigint (int8) columns hold millisecond timestamps and counts, all far below
// 2^53: read them as numbers, as SQLite returns them, not as strings.
const INT8 = 20;

// Every statement of a pool opened here is planned at each execution, for
// its values and the tables as they are then (the queue's pool below sets
// its own mode). The driver keeps statements prepared, and PostgreSQL would
// switch a prepared statement to one generic plan, kept for the
// connection's life, once five custom plans cost no less: on a new
// deployment's empty tables a sequential scan costs nothing, so the
// overview's seal, retention and an idempotency key's release went on
// scanning runs and events whole as they grew (3x the pages at 150,000 rows
// as at 50,000: test/queue-cost.test.ts), and nothing remade the plan with
// autovacuum off. Planning costs an ingest batch of 32 events about 0.2 ms
// of PostgreSQL's CPU (7 µs an event, bench/README); a prepared statement
// still saves its parse.
const MAIN_POOL = { plan_cache_mode: "force_custom_plan" };

export function openPostgres(options: PostgresOptions & { connection?: Record<string, string> }): OpenedPostgres {
  const sql = postgres(options.url, {
    max: options.poolSize ?? 10,
    connection: { ...MAIN_POOL, ...options.connection },
    onnotice: () => {},
    backoff: reconnectBackoff,
    types: {
      int8: { to: INT8, from: [INT8], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
    },
  });
  return { sql, db: drizzle(sql, { schema }) };
}

// The run queue's own pool. Its statements are planned once per connection
// (generic plans, kept with the driver's prepared statements), with the two
// scans that read a table or an index range whole switched off: sequential
// and bitmap scans. What is left to the planner is index scans, and every
// queue statement finds its rows through an index (by key, or a range that
// the statement's limit ends), so the plan it makes without parameter values
// or statistics walks the backlog's indexes in order and stops at the claim's
// size, on an empty table as at 50,000 queued (test/queue-cost.test.ts).
// The other choices had a cost: the generic plans PostgreSQL would switch to
// after 5 executions, planned for whatever the statistics said then (a never
// analyzed, nearly empty `runs`), read every queued run to take 7; custom
// plans replanned the claim at every execution, 1.2 ms of planning for
// 0.67 ms of work. bench/engine, four runs alternated on one idle machine:
// custom plans drained 50,000 runs at 2,136 and 2,112 runs/s, these at
// 2,465 and 2,544; event → run start p99 24 and 17 ms against 10 and 11.
// Statements that find runs by id are the exception: planned at each
// execution (./queue/held-run.ts). Its own pool also keeps claims and
// finishes from waiting behind ingestion's commits.
export function openQueuePool(url: string, poolSize = 3): OpenedPostgres {
  return openPostgres({ url, poolSize, connection: { plan_cache_mode: "force_generic_plan", enable_bitmapscan: "off", enable_seqscan: "off" } });
}

// Any fixed 64-bit key: migrations of every replica serialize on it.
const MIGRATION_LOCK = 7_104_519_233_001;

// Applies the committed migrations. Replicas starting together take turns on
// a session advisory lock: the first migrates, the others then find nothing
// left to apply. The lock is held on a reserved connection of its own.
export async function migratePostgres({ sql, db }: OpenedPostgres): Promise<void> {
  const lock = await sql.reserve();
  try {
    await lock`select pg_advisory_lock(${MIGRATION_LOCK})`;
    try {
      await migrate(db, { migrationsFolder: join(projectRoot(), "src/store/postgres/migrations") });
      await analyzeNew(sql);
    } finally {
      await lock`select pg_advisory_unlock(${MIGRATION_LOCK})`;
    }
  } finally {
    lock.release();
  }
}

// Statistics for tables that have none (a new database, a table a migration
// just created): until autovacuum's first analyze, which waits for enough
// changed rows, the planner would guess every selectivity. Tables analyzed
// before are left to autovacuum: analyzing a large table at every start
// would slow starts for nothing.
async function analyzeNew(sql: Sql): Promise<void> {
  const tables = await sql<{ name: string }[]>`
    select relname as name from pg_stat_user_tables
    where schemaname = current_schema() and last_analyze is null and last_autoanalyze is null`;
  for (const { name } of tables) await sql.unsafe(`analyze "${name.replace(/"/g, '""')}"`);
}
