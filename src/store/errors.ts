// Store failures the service layer turns into API errors, independent of the
// database underneath.
export class StoreConflictError extends Error {
  override name = "StoreConflictError";
}
export class StoreReferenceError extends Error {
  override name = "StoreReferenceError";
}
export class StoreUnavailableError extends Error {
  override name = "StoreUnavailableError";
}
// A value the store will never take, however often it is written again
// (PostgreSQL's data exceptions and program limits, SQLite's too-big): the
// writer must change what it writes, not wait.
export class StoreRefusedError extends Error {
  override name = "StoreRefusedError";
}

// Writes a record's JSON, or rejects as the store's refusal when JSON cannot
// write it (a string past V8's length, nesting past the stack): a promise,
// never a throw, so the writer sees it where it sees the store's answers.
export function writingJson<T>(write: (json: (value: unknown) => string) => Promise<T>): Promise<T> {
  try {
    return write((value) => JSON.stringify(value));
  } catch (err) {
    return Promise.reject(new StoreRefusedError(`the value cannot be written as JSON (${(err as Error).message})`));
  }
}

// A write that would take a tenant past a cap the caller set (queued runs).
export class StoreQuotaError extends Error {
  override name = "StoreQuotaError";
}
