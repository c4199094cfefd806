import type Database from "better-sqlite3";

// Runs `fn` with the connection waiting at most `ms` for the write lock
// instead of the store's usual 5 s (better-sqlite3 waits on the calling
// thread, the event loop's): undefined when the lock stayed taken.
export function withLockWait<T>(raw: Database.Database, ms: number, fn: () => T): T | undefined {
  const wait = raw.pragma("busy_timeout", { simple: true }) as number;
  raw.pragma(`busy_timeout = ${ms}`);
  try {
    return fn();
  } catch (err) {
    if ((err as { code?: unknown }).code === "SQLITE_BUSY") return undefined;
    throw err;
  } finally {
    raw.pragma(`busy_timeout = ${wait}`);
  }
}
