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

// bigint (int8) columns hold millisecond timestamps and counts, all far below
// 2^53: read them as numbers, as SQLite returns them, not as strings.
const INT8 = 20;

export function openPostgres(options: PostgresOptions): OpenedPostgres {
  const sql = postgres(options.url, {
    max: options.poolSize ?? 10,
    onnotice: () => {},
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
