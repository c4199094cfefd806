import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";

// How long a statement waits for another connection's write lock.
export const BUSY_TIMEOUT_MS = 5000;
// WAL pages a commit may leave before it checkpoints them into the database
// (SQLite's default is 1,000). A checkpoint copies each page once however
// many commits rewrote it, and ingest rewrites the same pages over and over:
// the last leaf of each index, once per tenant sending. With a hundred
// tenants those are ~600 pages, so at 1,000 nearly every checkpoint copied
// them all again (bench/webhooks `tenants`: 0.68-0.74x of one tenant's
// rate at 1,000, 0.79-0.98x at 10,000). About 40 MB of WAL between
// checkpoints; the file is cut back to this size after one that found it
// longer (a reader held a checkpoint back).
export const WAL_CHECKPOINT_PAGES = 10_000;
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

export interface SqliteOptions {
  // File path, or ":memory:".
  path: string;
  // FULL: an acknowledged write survives power loss, not only a crash.
  synchronous?: "FULL" | "NORMAL";
}

// A connection as every one of the store's is set up, on any thread.
// `checkpointPages`: the WAL pages past which this connection's commits
// checkpoint (the HTTP thread's leaves them to the others, see store.ts).
export function openConnection(options: SqliteOptions, checkpointPages = WAL_CHECKPOINT_PAGES): Database.Database {
  if (options.path !== ":memory:") mkdirSync(dirname(options.path), { recursive: true });
  const raw = new Database(options.path);
  raw.pragma("journal_mode = WAL");
  raw.pragma(`synchronous = ${options.synchronous ?? "FULL"}`);
  raw.pragma("foreign_keys = ON");
  raw.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  raw.pragma(`wal_autocheckpoint = ${checkpointPages}`);
  raw.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  return raw;
}
