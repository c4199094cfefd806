import type { Logger } from "pino";
import { FailureStreak } from "../lib/failure-streak.js";

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// A background job's rounds (retention, overview sealing): one `round` every
// interval, give or take a quarter so replicas do not line up; a round that
// fails while the database is down logs once, and once when one works.
export class Rounds {
  #timer?: NodeJS.Timeout;
  #stopped = false;
  #round?: Promise<unknown>;
  readonly #failures: FailureStreak;

  constructor(
    private readonly round: () => Promise<unknown>,
    private readonly intervalMs: number,
    log: Logger,
    what: string,
  ) {
    this.#failures = new FailureStreak(log, `${what} (tried again at the next interval)`);
  }

  // Set by stop(): a round checks it before each step, so none starts.
  get stopped(): boolean {
    return this.#stopped;
  }

  start(firstDelayMs: number): void {
    this.#stopped = false;
    this.#schedule(firstDelayMs);
  }

  // Waits for a round under way; no further step or round starts.
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#round;
  }

  #schedule(delayMs: number): void {
    this.#timer = setTimeout(() => {
      this.#round = this.round()
        .then(
          () => this.#failures.succeeded(),
          (err: unknown) => void this.#failures.failed(err),
        )
        .finally(() => {
          if (!this.#stopped) this.#schedule(this.intervalMs * (0.75 + Math.random() / 2));
        });
    }, delayMs);
    this.#timer.unref();
  }
}
