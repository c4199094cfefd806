import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";

// How long a statement waits for another connection's write lock.
export const BUSY_TIMEOUT_MS = 5000;

export interface SqliteOptions {
  // File path, or ":memory:".
  path: string;
  // FULL: an acknowledged write survives power loss, not only a crash.
  synchronous?: "FULL" | "NORMAL";
}

// A connection as every one of the store's is set up, on any thread.
export function openConnection(options: SqliteOptions): Database.Database {
  if (options.path !== ":memory:") mkdirSync(dirname(options.path), { recursive: true });
  const raw = new Database(options.path);
  raw.pragma("journal_mode = WAL");
  raw.pragma(`synchronous = ${options.synchronous ?? "FULL"}`);
  raw.pragma("foreign_keys = ON");
  raw.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  return raw;
}
