// At most one log line per key per window (a trigger whose filter fails on
// every event warns once a minute, not once per event). The line written
// says how many were held back since the one before.
export class LogThrottle {
  readonly #last = new Map<string, { at: number; held: number }>();

  constructor(
    private readonly windowMs: number,
    private readonly maxKeys = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  // How many lines were held back since this key's last one when this one
  // is to be written; undefined when it is held back.
  admit(key: string): number | undefined {
    const t = this.now();
    const last = this.#last.get(key);
    if (last && last.at > t - this.windowMs) {
      last.held++;
      return undefined;
    }
    if (!last && this.#last.size >= this.maxKeys) this.#last.clear();
    this.#last.set(key, { at: t, held: 0 });
    return last?.held ?? 0;
  }
}
