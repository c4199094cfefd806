// At most `maxRunning` tasks at once, at most `maxWaiting` waiting for a
// slot. A full queue or a wait longer than `maxWaitMs` is refused at once
// (`GateBusy`): a flood of distinct tokens must not pile up requests behind a
// slow identity provider.
export class GateBusy extends Error {
  override name = "GateBusy";
}

export class ConcurrencyGate {
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(
    readonly maxRunning: number,
    readonly maxWaiting: number,
    readonly maxWaitMs: number,
  ) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    await this.#acquire();
    try {
      return await task();
    } finally {
      this.#release();
    }
  }

  #acquire(): Promise<void> {
    if (this.#running < this.maxRunning) {
      this.#running++;
      return Promise.resolve();
    }
    if (this.#waiting.length >= this.maxWaiting)
      return Promise.reject(new GateBusy(`${this.#running} running and ${this.#waiting.length} waiting`));
    return new Promise<void>((resolve, reject) => {
      const grant = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(grant), 1);
        reject(new GateBusy(`waited ${this.maxWaitMs} ms for one of ${this.maxRunning} slots`));
      }, this.maxWaitMs);
      this.#waiting.push(grant);
    });
  }

  // The slot passes straight to the next waiter, so `#running` stays put.
  #release(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#running--;
  }
}
