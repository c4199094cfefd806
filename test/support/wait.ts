// How long a test waits for what must come but may come late on a loaded
// machine: a process's start, a run's end. It catches a hang, it measures
// nothing: on a 2-core machine with two make tests side by side (load
// average 30) a CLI process that starts in 1 s idle took 20 s and more.
export const PATIENCE_MS = 120_000;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// Polls `check` until it returns a value, or fails with `what` at the deadline.
export async function waitFor<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined> | T | undefined, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
