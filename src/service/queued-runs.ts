// The webhook path's view of how many runs each tenant has queued. Counting
// per event would put a COUNT query on a path that serves thousands of events
// a second, so a count is reused for up to `maxAgeMs` and raised by the runs
// this process queues meanwhile. Runs claimed meanwhile are not subtracted
// (the cap errs towards refusing, and the sender retries); runs queued by
// other processes in that window are not seen, so with several replicas a
// tenant may overshoot its cap by what they queue in one window.
export class QueuedRunCounts {
  readonly #entries = new Map<string, { count: number; at: number }>();
  readonly #pending = new Map<string, Promise<number>>();

  constructor(
    private readonly countQueued: (tenantId: string) => Promise<number>,
    private readonly maxAgeMs = 1000,
  ) {}

  // The count when it is fresh enough; no promise on the common path.
  fresh(tenantId: string, now: number): number | undefined {
    const entry = this.#entries.get(tenantId);
    return entry && now - entry.at < this.maxAgeMs ? entry.count : undefined;
  }

  async get(tenantId: string, now: number): Promise<number> {
    const fresh = this.fresh(tenantId, now);
    if (fresh !== undefined) return fresh;
    let pending = this.#pending.get(tenantId);
    if (!pending) {
      // Concurrent requests of a tenant share one query.
      pending = this.countQueued(tenantId).then(
        (count) => {
          this.#entries.set(tenantId, { count, at: now });
          this.#pending.delete(tenantId);
          return count;
        },
        (err: unknown) => {
          this.#pending.delete(tenantId);
          throw err;
        },
      );
      this.#pending.set(tenantId, pending);
    }
    return pending;
  }

  added(tenantId: string, runs: number): void {
    const entry = this.#entries.get(tenantId);
    if (entry) entry.count += runs;
  }
}
