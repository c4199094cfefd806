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
// A write that would take a tenant past a cap the caller set (queued runs).
export class StoreQuotaError extends Error {
  override name = "StoreQuotaError";
}
