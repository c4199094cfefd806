// Runs just committed as queued, and how they came.
export interface QueuedRun {
  id: string;
  tenantId: string;
  agentId: string;
  triggerId?: string | null;
  eventId?: string | null;
}
export type RunsQueued = (via: "webhook" | "run_agent" | "replay", runs: QueuedRun[]) => void;

// The webhook path's view of how many runs each tenant has queued, to refuse
// a tenant at its cap before its event reaches the store. It is only that
// early refusal: the store counts again in the transaction that queues the
// runs (see IngestItem.maxQueuedRuns), which is what holds the cap under a
// burst and across replicas. A count is reused for up to `maxAgeMs` and
// raised by the runs this process queues meanwhile; runs claimed meanwhile
// are not subtracted (the early refusal errs towards refusing, and the
// sender retries).
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
