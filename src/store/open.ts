import { createPostgresStore } from "./postgres/store.js";
import { createSqliteStore, type SqliteStoreOptions } from "./sqlite/store.js";
import type { Store } from "./store.js";

export interface OpenStoreOptions {
  // postgres:// or postgresql:// selects PostgreSQL; unset, SQLite.
  databaseUrl?: string;
  poolSize?: number;
  // Also the engine-neutral settings: `migrate` and `groupCommit` apply to
  // whichever engine opens.
  sqlite: SqliteStoreOptions;
}

const POSTGRES_URL = /^postgres(ql)?:\/\//i;

export async function openStore(options: OpenStoreOptions): Promise<Store> {
  const { databaseUrl, sqlite } = options;
  if (databaseUrl === undefined) return createSqliteStore(sqlite);
  // The URL may carry a password: the message names only what was wrong.
  if (!POSTGRES_URL.test(databaseUrl)) throw new Error("the database URL must start with postgres:// or postgresql://");
  return createPostgresStore({ url: databaseUrl, poolSize: options.poolSize, migrate: sqlite.migrate, groupCommit: sqlite.groupCommit });
}

// Where the store is, for operators' messages: the file, or the database URL
// without its password.
export function storeLocation(options: OpenStoreOptions): string {
  if (options.databaseUrl === undefined) return options.sqlite.path;
  const url = new URL(options.databaseUrl);
  if (url.password) url.password = "***";
  // libpq's form of the same.
  if (url.searchParams.has("password")) url.searchParams.set("password", "***");
  return url.toString();
}
