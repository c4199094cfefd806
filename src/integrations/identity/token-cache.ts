// A bounded map from token digests to what is known about the token, each
// entry kept no longer than its own deadline. When full, the least recently
// used entry goes (Map keeps insertion order; a hit moves the entry to the end).
export class TokenCache<T> {
  readonly #entries = new Map<string, { value: T; until: number }>();

  constructor(readonly maxEntries = 10_000) {}

  get(key: string, now = Date.now()): T | undefined {
    const hit = this.#entries.get(key);
    if (!hit) return undefined;
    this.#entries.delete(key);
    if (hit.until <= now) return undefined;
    this.#entries.set(key, hit);
    return hit.value;
  }

  set(key: string, value: T, until: number): void {
    if (until <= Date.now() || this.maxEntries < 1) return;
    this.#entries.delete(key);
    if (this.#entries.size >= this.maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(key, { value, until });
  }
}
