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

export function openPostgres(options: PostgresOptions): OpenedPostgres {
  const sql = postgres(options.url, {
    max: options.poolSize ?? 10,
    onnotice: () => {},
    backoff: reconnectBackoff,
    types: {
      int8: { to: INT8, from: [INT8], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
    },
  });
  return { sql, db: drizzle(sql, { schema }) };
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
    } finally {
      await lock`select pg_advisory_unlock(${MIGRATION_LOCK})`;
    }
  } finally {
    lock.release();
  }
}
