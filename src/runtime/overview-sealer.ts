import type { Logger } from "pino";
import { MAX_SEAL_SLOTS, type OverviewStore } from "../store/overview.js";
import { Rounds, sleep } from "./rounds.js";

export interface OverviewSealerOptions {
  store: Pick<OverviewStore, "unsealed" | "seal">;
  log: Logger;
  // Between rounds, give or take a quarter, so replicas do not line up. A
  // slot becomes sealable every 15 minutes; a minute's delay costs the
  // overview a minute more of live rows.
  intervalMs?: number;
  now?: () => number;
}

export interface SealRoundResult {
  // Passes (one transaction each) and the slots they sealed.
  passes: number;
  slots: number;
}

// Seals the tenant overview's slots (store/overview.ts): every interval a
// round over the tenants with slots left to seal, one pass each; a tenant
// whose pass sealed a whole day (a first round over a long history) gets
// another, until it is caught up. Each pass is followed by a pause as long
// as it took, so ingest (and other processes waiting for SQLite's write
// lock) get at least half the time. Any process may seal: the store seals
// each slot once, however many seal at the same time.
export class OverviewSealer {
  readonly #o: Required<OverviewSealerOptions>;
  readonly #rounds: Rounds;

  constructor(options: OverviewSealerOptions) {
    this.#o = { intervalMs: 60_000, now: Date.now, ...options };
    this.#rounds = new Rounds(() => this.runOnce(), this.#o.intervalMs, this.#o.log, "overview sealing round");
  }

  // The first round a whole interval after start, not at once: nothing is
  // lost waiting (the overview reads live rows until then), and what writes
  // history right after a start (a seeding script, a test) has its minute.
  start(): void {
    this.#rounds.start(this.#o.intervalMs * (0.75 + Math.random() / 2));
  }

  // Waits for a pass under way; no further pass starts.
  stop(): Promise<void> {
    return this.#rounds.stop();
  }

  async runOnce(): Promise<SealRoundResult> {
    const { store, log } = this.#o;
    const total: SealRoundResult = { passes: 0, slots: 0 };
    let tenants = await store.unsealed(this.#o.now());
    while (tenants.length && !this.#rounds.stopped) {
      const behind: string[] = [];
      for (const tenantId of tenants) {
        if (this.#rounds.stopped) break;
        const started = performance.now();
        const slots = await store.seal(tenantId, this.#o.now());
        total.passes++;
        total.slots += slots;
        if (slots === MAX_SEAL_SLOTS) behind.push(tenantId);
        await sleep(Math.max(1, performance.now() - started));
      }
      tenants = behind;
    }
    if (total.slots) log.debug(total, "overview slots sealed");
    return total;
  }
}
