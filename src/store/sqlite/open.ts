import { join } from "node:path";
import type Database from "better-sqlite3";
import { drizzle, type BetterSQLite3Database } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { projectRoot } from "../../lib/project-root.js";
import { openConnection, type SqliteOptions } from "./connection.js";
import * as schema from "./schema.js";

export type Db = BetterSQLite3Database<typeof schema>;

export interface OpenedSqlite {
  db: Db;
  raw: Database.Database;
}

export function openSqlite(options: SqliteOptions, checkpointPages?: number): OpenedSqlite {
  const raw = openConnection(options, checkpointPages);
  return { raw, db: drizzle(raw, { schema }) };
}

// A migration that rebuilds a table (drizzle-kit's way to change a column's
// nullability) drops the old one while other tables still reference it.
// SQLite ignores `PRAGMA foreign_keys` inside the transaction the migrator
// opens, so the checks are turned off around it, as SQLite's own procedure
// for altering a table says, and every reference is checked after.
export function migrateSqlite(db: Db, raw: Database.Database): void {
  raw.pragma("foreign_keys = OFF");
  try {
    migrate(db, { migrationsFolder: join(projectRoot(), "src/store/sqlite/migrations") });
    const broken = raw.pragma("foreign_key_check") as { table: string; parent: string }[];
    if (broken.length) {
      throw new Error(`migration left ${broken.length} broken reference(s), first ${broken[0]!.table} → ${broken[0]!.parent}`);
    }
  } finally {
    raw.pragma("foreign_keys = ON");
  }
}
