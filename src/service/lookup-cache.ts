import type { WebhookSourceRow } from "../store/rows.js";
import type { CachedTable, Store } from "../store/store.js";
import { TriggerIndex } from "./trigger-index.js";

export interface CacheLimits {
  maxEntries: number;
  // Total weight of the entries (see `weigh`), at most.
  maxWeight: number;
}

// Keys found absent, remembered apart from the values (so made-up keys can
// neither evict values nor grow memory past `maxEntries`, oldest out first).
export interface MissLimits {
  maxEntries: number;
  // How long a miss is believed without a change signal; a change to the
  // table forgets every miss at once.
  ttlMs: number;
}

// A bounded map of values loaded from the store, least recently used out
// first; with `misses`, keys found absent too, for a while. Concurrent loads
// of one key share one query. clear() also voids the loads under way: a
// value (or absence) read before a change must not be cached after the
// change dropped the cache.
export class LookupCache<V> {
  readonly #entries = new Map<string, { value: V; weight: number }>();
  readonly #loading = new Map<string, Promise<V | undefined>>();
  // Key → until when it is known absent.
  readonly #misses = new Map<string, number>();
  #weight = 0;
  #generation = 0;

  constructor(
    private readonly limits: CacheLimits,
    private readonly weigh: (value: V) => number = () => 1,
    private readonly misses?: MissLimits,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.#entries.size;
  }

  // The cached value, now the most recently used; no promise on the hot path.
  peek(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.value;
  }

  load(key: string, fetch: () => Promise<V | undefined>): Promise<V | undefined> {
    if (this.#missed(key)) return Promise.resolve(undefined);
    let pending = this.#loading.get(key);
    if (pending) return pending;
    const generation = this.#generation;
    pending = fetch().then(
      (value) => {
        if (generation !== this.#generation) return value;
        this.#loading.delete(key);
        if (value !== undefined) this.#set(key, value);
        else this.#miss(key);
        return value;
      },
      (err: unknown) => {
        if (generation === this.#generation) this.#loading.delete(key);
        throw err;
      },
    );
    this.#loading.set(key, pending);
    return pending;
  }

  delete(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    this.#weight -= entry.weight;
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
    this.#loading.clear();
    this.#misses.clear();
    this.#weight = 0;
  }

  #missed(key: string): boolean {
    const until = this.#misses.get(key);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.#misses.delete(key);
    return false;
  }

  #miss(key: string): void {
    if (!this.misses || this.misses.maxEntries < 1) return;
    if (this.#misses.size >= this.misses.maxEntries) this.#misses.delete(this.#misses.keys().next().value!);
    this.#misses.set(key, this.now() + this.misses.ttlMs);
  }

  #set(key: string, value: V): void {
    this.delete(key);
    const weight = this.weigh(value);
    this.#entries.set(key, { value, weight });
    this.#weight += weight;
    for (const [oldest, entry] of this.#entries) {
      if (this.#entries.size <= this.limits.maxEntries && this.#weight <= this.limits.maxWeight) break;
      if (oldest === key) break; // one value heavier than the limit is still cached alone
      this.#entries.delete(oldest);
      this.#weight -= entry.weight;
    }
  }
}

export interface LookupLimits {
  // Webhook sources by token digest, and signed sources by id (each its own
  // cache of this size).
  sources: CacheLimits;
  // Unknown token digests and source ids (each its own list of this size):
  // without them every unauthenticated post cost a store query.
  misses: MissLimits;
  // Trigger indexes by tenant and source; the weight is their triggers.
  triggers: CacheLimits;
}

const DEFAULT_LOOKUP_LIMITS: LookupLimits = {
  sources: { maxEntries: 10_000, maxWeight: 10_000 },
  // As long as the introspection cache believes a refused access token.
  misses: { maxEntries: 10_000, ttlMs: 10_000 },
  triggers: { maxEntries: 10_000, maxWeight: 200_000 },
};

// Whether the source accepts this digest at `now`: its current token, or its
// previous one until that expires. Checked on every hit, so a rotated token's
// grace period ends on time without any change to the row.
const accepts = (source: WebhookSourceRow, digest: string, now: number) =>
  source.tokenDigest === digest || (source.previousTokenDigest === digest && (source.previousTokenExpireTime ?? 0) > now);

// The two lookups of every webhook event, served from memory: the source by
// token digest (or by id, for a signed kind's delivery) and the compiled
// webhook triggers of a tenant and source. The
// store says when rows of those tables changed, in this process or any other
// (store.signals), and the affected cache is dropped.
export class WebhookLookups {
  readonly #sources: LookupCache<WebhookSourceRow>;
  readonly #sourcesById: LookupCache<WebhookSourceRow>;
  readonly #triggers: LookupCache<TriggerIndex>;

  constructor(
    private readonly store: Store,
    limits: LookupLimits = DEFAULT_LOOKUP_LIMITS,
  ) {
    this.#sources = new LookupCache(limits.sources, undefined, limits.misses);
    this.#sourcesById = new LookupCache(limits.sources, undefined, limits.misses);
    this.#triggers = new LookupCache(limits.triggers, (index) => index.size + 1);
    store.signals.onChanged((table: CachedTable | undefined) => {
      if (table === undefined || table === "webhook_sources") {
        this.#sources.clear();
        this.#sourcesById.clear();
      }
      if (table === undefined || table === "triggers" || table === "agents") this.#triggers.clear();
    });
  }

  cachedSource(digest: string, now: number): WebhookSourceRow | undefined {
    const source = this.#sources.peek(digest);
    if (!source || accepts(source, digest, now)) return source;
    this.#sources.delete(digest);
    return undefined;
  }

  async loadSource(digest: string, now: number): Promise<WebhookSourceRow | undefined> {
    const source = await this.#sources.load(digest, () => this.store.webhooks.findSourceByTokenDigest(digest, now));
    // A load shared with an earlier request was checked at that request's time.
    return source && accepts(source, digest, now) ? source : undefined;
  }

  cachedSourceById(id: string): WebhookSourceRow | undefined {
    return this.#sourcesById.peek(id);
  }

  loadSourceById(id: string): Promise<WebhookSourceRow | undefined> {
    return this.#sourcesById.load(id, () => this.store.webhooks.findSourceById(id));
  }

  cachedTriggers(tenantId: string, sourceId: string): TriggerIndex | undefined {
    return this.#triggers.peek(`${tenantId} ${sourceId}`);
  }

  async loadTriggers(tenantId: string, sourceId: string): Promise<TriggerIndex> {
    const index = await this.#triggers.load(`${tenantId} ${sourceId}`, async () =>
      new TriggerIndex(await this.store.webhooks.matchCandidates(tenantId, sourceId)),
    );
    return index!;
  }
}
