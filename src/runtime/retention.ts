import type { Logger } from "pino";
import type { PruneResult, RetentionStore } from "../store/store.js";
import { Rounds, sleep } from "./rounds.js";

const DAY_MS = 86_400_000;

export const DEFAULT_RETENTION = { days: 30, batch: 500 };

export interface RetentionOptions {
  store: RetentionStore;
  log: Logger;
  // Events and finished runs older than this go. At least 1: idempotency
  // keys live in the events and must last their 24 h.
  days: number;
  // Rows of each kind per batch (one short transaction each).
  batch: number;
  // Between rounds, give or take a quarter, so replicas do not line up.
  intervalMs?: number;
  now?: () => number;
}

export type RoundResult = PruneResult & { batches: number };

// Deletes what is past retention: every interval a round of batches, the next
// batch only while the last came back full, pausing between batches as long
// as the batch took, so ingest (and other processes waiting for SQLite's
// write lock) get at least half the time. On PostgreSQL one replica prunes at
// a time; the store tells the others to skip.
export class Retention {
  readonly #o: Required<RetentionOptions>;
  readonly #rounds: Rounds;

  constructor(options: RetentionOptions) {
    if (!(options.days >= 1)) throw new Error("retention must keep at least one day (the idempotency window)");
    this.#o = { intervalMs: 60_000, now: Date.now, ...options };
    this.#rounds = new Rounds(() => this.runOnce(), this.#o.intervalMs, this.#o.log, "retention round");
  }

  start(): void {
    this.#rounds.start(Math.random() * this.#o.intervalMs);
  }

  // Waits for a batch under way; no further batch starts.
  stop(): Promise<void> {
    return this.#rounds.stop();
  }

  async runOnce(): Promise<RoundResult> {
    const { store, batch, log } = this.#o;
    const before = this.#o.now() - this.#o.days * DAY_MS;
    const total: RoundResult = { events: 0, runs: 0, slots: 0, buckets: 0, rollups: 0, batches: 0 };
    for (;;) {
      const started = performance.now();
      const pruned = await store.prune(before, batch);
      if (!pruned) break;
      total.batches++;
      total.events += pruned.events;
      total.runs += pruned.runs;
      total.slots += pruned.slots;
      total.buckets += pruned.buckets;
      total.rollups += pruned.rollups;
      if (Math.max(pruned.events, pruned.runs, pruned.slots, pruned.buckets, pruned.rollups) < batch || this.#rounds.stopped) break;
      await sleep(Math.max(1, performance.now() - started));
    }
    if (total.events || total.runs) log.info({ ...total, before: new Date(before).toISOString() }, "retention deleted old events and runs");
    return total;
  }
}
