// The per-source webhook rate limit is one bucket for every process and
// replica on the database: three limiters, each on a connection of its own,
// share the configured rate; one alone can use all of it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RateLimiter } from "../src/service/rate-limit.js";
import { StoreUnavailableError } from "../src/store/errors.js";
import { migratePostgres, openPostgres } from "../src/store/postgres/open.js";
import { createPgRateLimits } from "../src/store/postgres/rate-limits.js";
import { createSqliteStore } from "../src/store/sqlite/store.js";
import type { RateLimitStore } from "../src/store/store.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { createTestDatabase } from "./support/postgres.js";
import { bearer, connectCall, startServer, type TestServerOptions } from "./support/server.js";

interface Connection {
  rateLimits: RateLimitStore;
  close(): Promise<void>;
}

interface Engine {
  // A new connection to the one database of the suite.
  connect(): Connection;
  cleanup(): Promise<void>;
}

async function sqliteEngine(): Promise<Engine> {
  const dir = mkdtempSync(join(tmpdir(), "agentplane-rate-"));
  const path = join(dir, "agentplane.db");
  createSqliteStore({ path }).close();
  return {
    connect() {
      const store = createSqliteStore({ path, migrate: false });
      return { rateLimits: store.rateLimits, close: () => store.close() };
    },
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function postgresEngine(): Promise<Engine> {
  const database = await createTestDatabase();
  const first = openPostgres({ url: database.url, poolSize: 2 });
  await migratePostgres(first);
  await first.sql.end();
  return {
    connect() {
      const { sql } = openPostgres({ url: database.url, poolSize: 4 });
      return { rateLimits: createPgRateLimits(sql), close: () => sql.end() };
    },
    cleanup: () => database.drop(),
  };
}

// A clock the test moves: every take of a step sees the same instant, so
// how many tokens the bucket grants depends on the rate alone, not on how
// fast a loaded machine gets the takes to the store.
class SteppedClock {
  constructor(public ms = 1_700_000_000_000) {}
  readonly now = () => this.ms;
}

// Callers taking concurrently from one key at each `stepMs` of `ms` stepped
// time (all of a step's takes in flight at once, over every connection),
// more than the rate grants per step; returns the tokens they got. Which
// taker asks first turns with each step, as arrival order varies in time.
async function hammer(clock: SteppedClock, takers: (() => Promise<number>)[], ms: number, stepMs: number, callersEach = 4): Promise<{ accepted: number; seconds: number }> {
  let accepted = 0;
  const start = clock.ms;
  for (; clock.ms - start < ms; clock.ms += stepMs) {
    const first = ((clock.ms - start) / stepMs) % takers.length;
    const turn = [...takers.slice(first), ...takers.slice(0, first)];
    const got = await Promise.all(turn.flatMap((take) => Array.from({ length: callersEach }, take)));
    accepted += got.reduce((a, b) => a + b, 0);
  }
  return { accepted, seconds: (clock.ms - start) / 1000 };
}

const OK_TAKE = { ok: true };

// One bucket's take, as a call of one.
const takeOne = async (store: RateLimitStore, key: string, ratePerSecond: number, burst: number, now: number, want = 1) =>
  (await store.take([{ key, ratePerSecond, burst, want }], now))[0];
const RATE = 400;
const BURST = 100;
// The bucket refills for the last step's time too, but nobody takes it.
const expectTheRate = (accepted: number, seconds: number, stepMs: number, rate = RATE, burst = BURST) => {
  const allowed = Math.floor(rate * (seconds - stepMs / 1000) + burst);
  expect(accepted).toBeLessThanOrEqual(allowed);
  expect(accepted).toBeGreaterThanOrEqual(allowed * 0.95);
};

describe.each([
  ["SQLite", sqliteEngine],
  ["PostgreSQL", postgresEngine],
])("rate-limit buckets on %s", (_name, open) => {
  let engine: Engine;
  const connections: Connection[] = [];
  const connect = () => {
    const c = engine.connect();
    connections.push(c);
    return c;
  };

  beforeAll(async () => {
    engine = await open();
  });
  afterEach(async () => {
    await Promise.all(connections.splice(0).map((c) => c.close()));
  });
  afterAll(async () => {
    await engine.cleanup();
  });

  it("starts a bucket full, grants up to what is asked, and says when the next token comes", async () => {
    const { rateLimits } = connect();
    const t = 1_000_000;
    expect(await takeOne(rateLimits, "fresh", 10, 5, t, 3)).toEqual({ ok: true, granted: 3 });
    expect(await takeOne(rateLimits, "fresh", 10, 5, t, 3)).toEqual({ ok: true, granted: 2 });
    const refused = await takeOne(rateLimits, "fresh", 10, 5, t);
    expect(refused).toEqual({ ok: false, retryAfterMs: 100 });
    // Half a token refilled: the other half comes in 50 ms.
    expect(await takeOne(rateLimits, "fresh", 10, 5, t + 50)).toEqual({ ok: false, retryAfterMs: 50 });
    expect(await takeOne(rateLimits, "fresh", 10, 5, t + 100)).toEqual({ ok: true, granted: 1 });
    // Refills up to the burst, no further.
    expect(await takeOne(rateLimits, "fresh", 10, 5, t + 60_000, 100)).toEqual({ ok: true, granted: 5 });
    // A clock behind the bucket's (another replica's) refills nothing.
    expect(await takeOne(rateLimits, "fresh", 10, 5, t, 1)).toEqual({ ok: false, retryAfterMs: 100 });
  });

  it("keeps one bucket per key", async () => {
    const { rateLimits } = connect();
    expect(await takeOne(rateLimits, "a", 1, 1, 5_000)).toEqual({ ok: true, granted: 1 });
    expect(await takeOne(rateLimits, "a", 1, 1, 5_000)).toEqual({ ok: false, retryAfterMs: 1000 });
    expect(await takeOne(rateLimits, "b", 1, 1, 5_000)).toEqual({ ok: true, granted: 1 });
  });

  it("takes from several buckets in one call, answering in the order asked", async () => {
    const { rateLimits } = connect();
    const t = 2_000_000;
    await takeOne(rateLimits, "many-empty", 10, 1, t);
    const taken = await rateLimits.take(
      [
        { key: "many-fresh", ratePerSecond: 10, burst: 5, want: 3 },
        { key: "many-empty", ratePerSecond: 10, burst: 1, want: 1 },
        { key: "many-small", ratePerSecond: 1000, burst: 2, want: 10 },
      ],
      t,
    );
    expect(taken).toEqual([{ ok: true, granted: 3 }, { ok: false, retryAfterMs: 100 }, { ok: true, granted: 2 }]);
    // Each bucket kept what its take left.
    expect(await takeOne(rateLimits, "many-fresh", 10, 5, t, 5)).toEqual({ ok: true, granted: 2 });
    expect(await takeOne(rateLimits, "many-small", 1000, 2, t)).toEqual({ ok: false, retryAfterMs: 1 });
  });

  // Two connections creating the same new buckets in opposite orders: each
  // bucket starts full once, and neither call deadlocks or fails.
  it("creates the same new buckets from two connections at once", async () => {
    const [a, b] = [connect().rateLimits, connect().rateLimits];
    const keys = Array.from({ length: 50 }, (_, i) => `race-${i}`);
    const asked = (order: string[]) => order.map((key) => ({ key, ratePerSecond: 1, burst: 3, want: 2 }));
    const [first, second] = await Promise.all([a.take(asked(keys), 9_000), b.take(asked([...keys].reverse()), 9_000)]);
    const granted = (results: typeof first, i: number) => (results[i]!.ok ? (results[i] as { granted: number }).granted : 0);
    for (let i = 0; i < keys.length; i++) expect(granted(first, i) + granted(second, keys.length - 1 - i)).toBe(3);
  });

  it("holds the rate across three connections taking one token at a time", async () => {
    const clock = new SteppedClock();
    const stores = [connect(), connect(), connect()].map((c) => c.rateLimits);
    const { accepted, seconds } = await hammer(
      clock,
      stores.map((s) => async () => {
        const r = (await takeOne(s, "shared-store", RATE, BURST, clock.now()))!;
        return r.ok ? r.granted : 0;
      }),
      2000,
      10,
    );
    expectTheRate(accepted, seconds, 10);
  });

  it("holds the rate across three limiters leasing tokens in batches", async () => {
    const clock = new SteppedClock();
    const limiters = [connect(), connect(), connect()].map((c) => new RateLimiter({ store: c.rateLimits, ratePerSecond: RATE, burst: BURST, now: clock.now }));
    const shares = [0, 0, 0];
    const { accepted, seconds } = await hammer(
      clock,
      limiters.map((l, i) => async () => {
        const ok = (await l.take("shared-limiter")).ok ? 1 : 0;
        shares[i]! += ok;
        return ok;
      }),
      2000,
      10,
    );
    expectTheRate(accepted, seconds, 10);
    // Every replica gets a share, not only the fastest.
    for (const share of shares) expect(share).toBeGreaterThan(accepted / 10);
  });

  // Leases of up to 40 tokens: sized by what each replica was asked for
  // lately, not by how many callers happen to wait for the store.
  it("holds a high rate across three limiters", async () => {
    const clock = new SteppedClock();
    const limiters = [connect(), connect(), connect()].map((c) => new RateLimiter({ store: c.rateLimits, ratePerSecond: 2000, burst: 200, now: clock.now }));
    const { accepted, seconds } = await hammer(
      clock,
      limiters.map((l) => async () => ((await l.take("shared-high")).ok ? 1 : 0)),
      2000,
      2,
      8,
    );
    expectTheRate(accepted, seconds, 2, 2000, 200);
  });

  it("lets one limiter alone use the whole rate", async () => {
    const clock = new SteppedClock();
    const limiter = new RateLimiter({ store: connect().rateLimits, ratePerSecond: RATE, burst: BURST, now: clock.now });
    const { accepted, seconds } = await hammer(clock, [async () => ((await limiter.take("alone")).ok ? 1 : 0)], 2000, 10, 8);
    expectTheRate(accepted, seconds, 10);
  });

  it("answers a whole second at least in Retry-After, and the next token after it", async () => {
    const clock = new SteppedClock();
    const limiter = new RateLimiter({ store: connect().rateLimits, ratePerSecond: 2, burst: 1, now: clock.now });
    expect(await limiter.take("slow")).toEqual({ ok: true });
    const refused = await limiter.take("slow");
    expect(refused).toEqual({ ok: false, retryAfterSeconds: 1 });
    clock.ms += 499;
    expect(await limiter.take("slow")).toEqual({ ok: false, retryAfterSeconds: 1 });
    clock.ms += 1;
    expect(await limiter.take("slow")).toEqual({ ok: true });
  });

  // The store may be slow to answer (on SQLite its take can wait behind a
  // commit): a key in steady use asks for its next lease as it spends its
  // last token, so the request after does not wait for the store.
  it("renews a busy key's lease ahead, as its last token is spent", async () => {
    const clock = new SteppedClock();
    const { rateLimits } = connect();
    let asked = 0;
    let slow = false;
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    // The real store, counted, and held from answering once `slow`.
    const held: RateLimitStore = {
      take: async (...args) => {
        asked++;
        if (slow) await answered;
        return rateLimits.take(...args);
      },
    };
    // 100/s: leases of at most two tokens.
    const limiter = new RateLimiter({ store: held, ratePerSecond: 100, burst: 100, now: clock.now });
    for (let i = 0; i < 6; i++) expect(await limiter.take("busy")).toEqual({ ok: true });
    slow = true;
    const askedBefore = asked;
    // Takes until the store is asked: each answers from the lease at once,
    // the one that spends the last token included.
    const results: unknown[] = [];
    while (asked === askedBefore && results.length < 4) {
      const result = await Promise.race([limiter.take("busy"), new Promise((resolve) => setImmediate(() => resolve("waited for the store")))]);
      results.push(result);
      if (typeof result === "string") break;
    }
    answer();
    expect(asked).toBe(askedBefore + 1);
    expect(results.length).toBeGreaterThan(0);
    for (const result of results) expect(result).toEqual(OK_TAKE);
  });

  // A hundred sources sending at once, each running out of its lease: their
  // renewals share the store calls rather than making one each.
  it("renews the leases of many keys together, one store call at a time", async () => {
    const clock = new SteppedClock();
    const { rateLimits } = connect();
    const calls: number[] = [];
    let inFlight = 0;
    const counted: RateLimitStore = {
      take: async (takes, now) => {
        expect(++inFlight).toBe(1);
        calls.push(takes.length);
        return rateLimits.take(takes, now).finally(() => inFlight--);
      },
    };
    const limiter = new RateLimiter({ store: counted, ratePerSecond: 100, burst: 100, now: clock.now });
    const keys = Array.from({ length: 100 }, (_, i) => `source-${i}`);
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(keys.map((key) => limiter.take(key)));
      for (const result of results) expect(result).toEqual(OK_TAKE);
      // Past the lease: every key asks again.
      clock.ms += 1_000;
    }
    // The first key's call, then the other 99 in the next, each round.
    expect(calls).toEqual([1, 99, 1, 99, 1, 99]);
  });

  it("fails closed when the store is unavailable", async () => {
    const c = engine.connect();
    await c.close();
    await expect(takeOne(c.rateLimits, "k", 1, 1, Date.now())).rejects.toBeInstanceOf(StoreUnavailableError);
    const limiter = new RateLimiter({ store: c.rateLimits, ratePerSecond: 1, burst: 1 });
    await expect(limiter.take("k")).rejects.toBeInstanceOf(StoreUnavailableError);
  });
});

describe("webhooks over the shared bucket", () => {
  // A server on a stepped clock with one webhook source of tenant acme: the
  // admin's bearer headers, and a post of one event to the source.
  async function serverWithSource(options: Pick<TestServerOptions, "webhook" | "retention">) {
    const issuer = await devIssuer();
    const admin = bearer(await devToken(issuer), "acme");
    const clock = new SteppedClock();
    const server = await startServer({ authenticator: issuer.authenticator(60), ...options, now: clock.now });
    const token = await (async () => {
      try {
        await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
        return (await connectCall(server, "CreateWebhookSource", { webhookSource: { name: "s" } }, admin)).body.token as string;
      } catch (err) {
        await server.close();
        throw err;
      }
    })();
    const post = async () => {
      const res = await fetch(`${server.url}/webhooks/events`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-webhook-token": token },
        body: JSON.stringify({ event_type: "order.created", payload: {} }),
      });
      return { status: res.status, retryAfter: res.headers.get("retry-after"), body: JSON.parse(await res.text()) as { event_id?: string } };
    };
    return { server, clock, admin, post };
  }

  it("accept the configured rate and answer 429 with Retry-After past it", async () => {
    const { server, clock, post } = await serverWithSource({ webhook: { maxBytes: 4096, ratePerSecond: 20, burst: 10 } });
    try {
      // Five times the rate offered: 10 posts every 100 ms for 2 s.
      const statuses: number[] = [];
      let limited: { retryAfter: string | null; body: unknown } | undefined;
      for (let step = 0; step < 20; step++, clock.ms += 100) {
        for (let i = 0; i < 10; i++) {
          const res = await post();
          statuses.push(res.status);
          if (res.status === 429) limited ??= { retryAfter: res.retryAfter, body: res.body };
          else expect(res.status).toBe(202);
        }
      }
      // The burst, then 20 a second for the 1.9 s after the first step.
      expect(statuses.filter((s) => s === 202)).toHaveLength(10 + 38);
      expect(limited).toEqual({ retryAfter: "1", body: expect.objectContaining({ error: "resource_exhausted" }) });
    } finally {
      await server.close();
    }
  });

  // Retention deletes buckets idle past the retention days, judged on the
  // service's clock, the one the buckets are filled by: an emptied bucket in
  // use is never deleted (which would refill it to its burst).
  it("keeps an emptied bucket through retention rounds on the service's clock", async () => {
    const { server, clock, admin, post } = await serverWithSource({
      webhook: { maxBytes: 4096, ratePerSecond: 1, burst: 3 },
      retention: { days: 30, batch: 500, intervalMs: 20 },
    });
    try {
      const event = async (id: string) => (await connectCall(server, "GetEvent", { id }, admin)).status;
      // An event past retention, whose deletion shows a round has run.
      const start = clock.ms;
      clock.ms = start - 31 * 86_400_000;
      const old = await post();
      expect(old.status).toBe(202);
      clock.ms = start;
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await post()).status);
      expect(statuses).toEqual([202, 202, 202, 429]);
      while ((await event(old.body.event_id!)) !== 404) await new Promise((resolve) => setTimeout(resolve, 20));
      // A second later, the one token a second has brought.
      clock.ms += 1000;
      const after: number[] = [];
      for (let i = 0; i < 2; i++) after.push((await post()).status);
      expect(after).toEqual([202, 429]);
    } finally {
      await server.close();
    }
  });
});
