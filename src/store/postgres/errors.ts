import { DrizzleQueryError } from "drizzle-orm";
import { StoreConflictError, StoreReferenceError, StoreRefusedError, StoreUnavailableError } from "../errors.js";

// SQLSTATEs that mean "the database cannot serve now", as opposed to a bad
// request: connection exceptions (08), insufficient resources (53), operator
// intervention such as a shutdown or a dropped database (57P0x, and 57014: a
// cancelled statement), a database that does not exist (3D000) or refuses
// connections (55000), failed authentication (28), and the transient
// conflicts a retry resolves (40001 serialization, 40P01 deadlock, 55P03 lock
// not available).
// Data exceptions (22: a NUL in text, \u0000 or an unpaired surrogate in jsonb,
// a value too long) and program limits (54: a value past 1 GB, too deep):
// the same value is refused every time.
const REFUSED_SQLSTATE = /^(22|54)/;

const UNAVAILABLE_SQLSTATE = /^(08|53|57P0|28|40001$|40P01$|3D000$|55000$|55P03$|57014$)/;

// What postgres.js and Node report when there is no connection at all.
const CONNECTION_CODES = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

export function toStoreError(err: unknown): unknown {
  // Drizzle wraps the driver's error; its own message repeats the query and
  // its parameters, which the driver's does not.
  const cause = err instanceof DrizzleQueryError && err.cause instanceof Error ? err.cause : err;
  const code = (cause as { code?: unknown }).code;
  if (typeof code !== "string") return cause;
  const message = (cause as Error).message;
  if (code === "23505") return new StoreConflictError(message);
  if (code === "23503") return new StoreReferenceError(message);
  if (CONNECTION_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code)) return new StoreUnavailableError(message);
  if (REFUSED_SQLSTATE.test(code)) return new StoreRefusedError(message);
  return cause;
}

// Runs a store call, turning driver errors into the store's.
export async function pg<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toStoreError(err);
  }
}
