import { pause } from "./pause.js";

// What a call that retries transient failures reports about its tries, so
// that a run step shows each one as it happens. The first try starts with
// the call.
export interface CallTries {
  // The current try failed with `error`; the next one is due in `delayMs`.
  // Resolves when it may begin (at once when `signal` aborts): the one who
  // records the tries keeps the time, so a retry's recorded start and the
  // wait before it come from one clock.
  backoff(error: string, delayMs: number, signal: AbortSignal): Promise<void>;
  // Resolves when a try may go out now, just before it is sent; rejects with
  // `signal`'s reason, `signal` aborted, when the caller may no longer make
  // it (a run whose lease another worker has taken over meanwhile).
  ready(signal: AbortSignal): Promise<void>;
}

// Tries nobody records: the backoff is a plain wait.
export const UNRECORDED_TRIES: CallTries = {
  backoff: (_error, delayMs, signal) => pause(delayMs, signal),
  ready: async () => {},
};
