// Waits `ms`, or less when the signal aborts (it never rejects).
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

// Waits until `clock` reads `time` or later, or less when the signal aborts.
// A timer runs on the event loop's cached monotonic time, so by another
// clock it may fire early (by a millisecond, or by however long the loop's
// current turn had run when it was set); this waits out the rest.
export async function pauseUntil(time: number, clock: () => number, signal: AbortSignal): Promise<void> {
  for (let left = time - clock(); left > 0 && !signal.aborted; left = time - clock()) await pause(left, signal);
}
