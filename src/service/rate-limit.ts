// Token buckets keyed by webhook source: `ratePerSecond` sustained, `burst`
// at once. In-memory, so the limit is per replica.
export class RateLimiter {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    readonly ratePerSecond: number,
    readonly burst: number,
  ) {}

  // Takes a token, or returns how many seconds until one is available.
  take(key: string, now = Date.now()): { ok: true } | { ok: false; retryAfterSeconds: number } {
    const bucket = this.#buckets.get(key) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.ratePerSecond);
    bucket.at = now;
    this.#buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / this.ratePerSecond)) };
  }
}
