import type { Principal } from "./principal.js";

// A bounded map of validated tokens to principals, each entry kept no longer
// than its own deadline. Oldest entries go first when full (Map keeps
// insertion order).
export class TokenCache {
  readonly #entries = new Map<string, { principal: Principal; until: number }>();

  constructor(readonly maxEntries = 10_000) {}

  get(key: string, now = Date.now()): Principal | undefined {
    const hit = this.#entries.get(key);
    if (!hit) return undefined;
    if (hit.until <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    return hit.principal;
  }

  set(key: string, principal: Principal, until: number): void {
    if (until <= Date.now()) return;
    if (this.#entries.size >= this.maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(key, { principal, until });
  }
}
