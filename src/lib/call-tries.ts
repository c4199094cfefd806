// What a call that retries transient failures reports about its tries, so
// that a run step shows each one as it happens. The first try starts with
// the call.
export interface CallTries {
  // The current try failed with `error`; the next one is due in `delayMs`.
  failed(error: string, delayMs: number): void;
  // The try that was due begins now.
  retrying(): void;
}
