import { StoreConflictError, StoreReferenceError, StoreRefusedError, StoreUnavailableError } from "../errors.js";

// SQLite error codes that mean "the database cannot serve now", as opposed to
// a bad request: they surface as `unavailable`.
export const UNAVAILABLE_CODES = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|READONLY|CORRUPT|NOTADB|PROTOCOL)/;

export function toStoreError(err: unknown): unknown {
  const code = (err as { code?: unknown }).code;
  const message = (err as Error).message;
  if (typeof code === "string") {
    if (code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY") return new StoreConflictError(message);
    if (code === "SQLITE_CONSTRAINT_FOREIGNKEY") return new StoreReferenceError(message);
    if (UNAVAILABLE_CODES.test(code)) return new StoreUnavailableError(message);
    // A string or blob past SQLite's length limit: refused every time.
    if (code === "SQLITE_TOOBIG") return new StoreRefusedError(message);
  }
  // Matched by message: the native module's TypeError may come from another realm.
  if (/database connection is not open/.test(message)) return new StoreUnavailableError(message);
  return err;
}

// Runs a synchronous better-sqlite3 call behind the async store contract.
export function run<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(toStoreError(err));
  }
}

