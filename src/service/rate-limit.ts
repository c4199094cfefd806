import type { RateLimitStore } from "../store/store.js";

export interface RateLimiterOptions {
  // The buckets every process and replica on the database shares.
  store: RateLimitStore;
  ratePerSecond: number;
  burst: number;
  now?: () => number;
  // How long leased tokens may be spent locally; the rest is dropped.
  leaseMs?: number;
}

export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number };

// Tokens of one key leased from the shared bucket and spent here.
interface Lease {
  tokens: number;
  expires: number;
  // The shared bucket was empty: refuse here until then.
  emptyUntil: number;
  // Takes in the current and the previous half lease: the next lease's size.
  takes: number;
  takesBefore: number;
  windowStart: number;
  pending?: Promise<void>;
}

interface Renewal {
  key: string;
  lease: Lease;
  resolve(): void;
  reject(err: unknown): void;
}

const OK: TakeResult = { ok: true };
const SWEEP_EVERY_MS = 10_000;

// Token buckets keyed by webhook source, `ratePerSecond` sustained and
// `burst` at once, shared by every process and replica through the store.
// Asking the store per request would put a database write on every webhook,
// so each process leases a few tokens at a time: as many as it was asked for
// in the last half lease, at most a fiftieth of a second's worth, spent
// within `leaseMs` or dropped. Tokens are only ever taken from the shared bucket, so
// all replicas together never pass the rate; leases sized by demand keep a
// quiet replica from holding tokens a busy one needs, and one replica alone
// gets the whole rate. One renewal per key is under way per process; the
// takes that arrive meanwhile wait for it, and a key in steady use asks for
// it as it spends its last token, ahead of the request that needs more. An
// empty bucket says when its next token comes, and takes until then are
// refused here without asking. The renewals of every key go to the store
// together, one call at a time: with a hundred sources sending, a call per
// key was a transaction per source every 50 ms.
export class RateLimiter {
  readonly #o: Required<RateLimiterOptions>;
  readonly #maxLease: number;
  readonly #leases = new Map<string, Lease>();
  readonly #queued: Renewal[] = [];
  #calling = false;
  #sweepAt = 0;

  constructor(options: RateLimiterOptions) {
    this.#o = { now: Date.now, leaseMs: 100, ...options };
    this.#maxLease = Math.max(1, Math.min(Math.floor(options.ratePerSecond / 50), Math.floor(options.burst)));
  }

  // Takes a token, or says in whole seconds (at least 1) when to retry.
  // Rejects with the store's error when the store cannot answer.
  async take(key: string): Promise<TakeResult> {
    const lease = this.#lease(key);
    this.#count(lease, this.#o.now());
    for (;;) {
      const now = this.#o.now();
      if (lease.tokens >= 1 && now < lease.expires) {
        lease.tokens--;
        // A key in steady use renews its lease as it spends the last token,
        // so the next request finds tokens rather than waiting for the store
        // (which on SQLite may be behind a commit). A failed renewal is met
        // again, and answered, by the take that needs it.
        if (lease.tokens < 1 && !lease.pending && this.#demand(lease, now) > 1)
          lease.pending = this.#renew(key, lease)
            .catch(() => {})
            .finally(() => (lease.pending = undefined));
        return OK;
      }
      if (now < lease.emptyUntil) return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((lease.emptyUntil - now) / 1000)) };
      lease.pending ??= this.#renew(key, lease).finally(() => (lease.pending = undefined));
      await lease.pending;
    }
  }

  // Queued for the next store call; resolved once the lease is renewed.
  #renew(key: string, lease: Lease): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#queued.push({ key, lease, resolve, reject });
      if (!this.#calling) void this.#call();
    });
  }

  // One store call at a time, for every renewal queued when it starts: the
  // keys that ran out while a call was under way share the next one.
  async #call(): Promise<void> {
    this.#calling = true;
    while (this.#queued.length) {
      const renewals = this.#queued.splice(0);
      const asked = this.#o.now();
      const takes = renewals.map(({ key, lease }) => ({
        key,
        ratePerSecond: this.#o.ratePerSecond,
        burst: this.#o.burst,
        want: Math.min(this.#maxLease, Math.max(1, Math.ceil(this.#demand(lease, asked)))),
      }));
      try {
        const taken = await this.#o.store.take(takes, asked);
        const now = this.#o.now();
        renewals.forEach(({ lease, resolve }, i) => {
          const result = taken[i]!;
          if (result.ok) {
            // Tokens still unspent when renewed ahead stay spendable.
            lease.tokens = (now < lease.expires ? lease.tokens : 0) + result.granted;
            lease.expires = now + this.#o.leaseMs;
          } else {
            lease.tokens = 0;
            lease.emptyUntil = now + result.retryAfterMs;
          }
          resolve();
        });
      } catch (err) {
        for (const { reject } of renewals) reject(err);
      }
    }
    this.#calling = false;
  }

  #count(lease: Lease, now: number): void {
    const window = this.#o.leaseMs / 2;
    if (now - lease.windowStart >= window) {
      lease.takesBefore = now - lease.windowStart >= 2 * window ? 0 : lease.takes;
      lease.takes = 0;
      lease.windowStart = now - ((now - lease.windowStart) % window);
    }
    lease.takes++;
  }

  // Takes in the last half lease (the previous window prorated): what this
  // process will likely spend well before the lease runs out.
  #demand(lease: Lease, now: number): number {
    const window = this.#o.leaseMs / 2;
    const elapsed = Math.min(1, (now - lease.windowStart) / window);
    return lease.takes + lease.takesBefore * (1 - elapsed);
  }

  #lease(key: string): Lease {
    let lease = this.#leases.get(key);
    if (!lease) {
      this.#sweep();
      lease = { tokens: 0, expires: 0, emptyUntil: 0, takes: 0, takesBefore: 0, windowStart: 0 };
      this.#leases.set(key, lease);
    }
    return lease;
  }

  // Forgets keys with nothing left to spend or wait for, so sources that
  // stopped sending do not stay in memory.
  #sweep(): void {
    const now = this.#o.now();
    if (now < this.#sweepAt) return;
    this.#sweepAt = now + SWEEP_EVERY_MS;
    for (const [key, lease] of this.#leases)
      if (!lease.pending && now >= lease.expires && now >= lease.emptyUntil) this.#leases.delete(key);
  }
}
