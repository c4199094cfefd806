import type { Logger } from "pino";

// A loop that retries a failing call (a claim, a heartbeat, a scheduler
// tick) logs when it starts failing and when it works again, not on every
// try: a database outage of a minute is two lines, not hundreds. It also
// says how long to wait before the next try: doubling from `firstMs` up to
// `maxMs`, so a short outage is ridden out within `maxMs` of its end.
export class FailureStreak {
  #failures = 0;
  #since = 0;

  constructor(
    private readonly log: Logger,
    // "run queue claim", "lease heartbeat"…: the subject of the lines.
    private readonly what: string,
    private readonly firstMs = 50,
    private readonly maxMs = 1000,
  ) {}

  get failing(): boolean {
    return this.#failures > 0;
  }

  // Records a failure; returns the wait before the next try.
  failed(err: unknown): number {
    if (this.#failures++ === 0) {
      this.#since = Date.now();
      this.log.error({ err }, `${this.what} failed; retrying until it works (logged again when it does)`);
    }
    return Math.min(this.maxMs, this.firstMs * 2 ** (this.#failures - 1));
  }

  succeeded(): void {
    if (this.#failures === 0) return;
    this.log.warn({ failures: this.#failures, failingMs: Date.now() - this.#since }, `${this.what} works again`);
    this.#failures = 0;
  }
}
