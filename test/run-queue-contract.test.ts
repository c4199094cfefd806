// The run queue contract, the same assertions on both engines: leases,
// expiry, bounded attempts, release, cancellation, heartbeats; claimers on
// connections of their own never get the same run; the claim is fair between
// tenants; an agent's max_concurrent_runs holds with concurrent claimers; a
// finish that resolved is durable for every other connection; PostgreSQL
// notifies the other replicas.
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newId } from "../src/lib/ids.js";
import { CHANNELS } from "../src/store/postgres/channels.js";
import { migratePostgres, openPostgres, type OpenedPostgres } from "../src/store/postgres/open.js";
import { createPgRunQueue } from "../src/store/postgres/queue.js";
import { queuedCount } from "../src/store/postgres/runs.js";
import type { RunRow } from "../src/store/rows.js";
import { SignalHub } from "../src/store/signal-hub.js";
import { ChangeNotifier } from "../src/store/postgres/change-notifier.js";
import { signalledQueue } from "../src/store/signalled.js";
import { createSqliteStore } from "../src/store/sqlite/store.js";
import type { RunOutcome, RunQueue } from "../src/store/store.js";
import { createTestDatabase } from "./support/postgres.js";

// What another connection reads back.
interface Stored {
  status: string;
  attempt: number;
  leaseOwner: string | null;
  leaseExpireTime: number | null;
  startTime: number | null;
  endTime: number | null;
  error: string;
  steps: unknown;
  output: unknown;
  updateTime: number;
}

interface Engine {
  queue: RunQueue;
  // A queue on a connection (pool) of its own, as another replica has.
  replica(): RunQueue;
  addTenant(id: string): Promise<void>;
  addAgent(tenantId: string, id: string, maxConcurrentRuns?: number | null): Promise<void>;
  // Read on a connection that did not write.
  read(id: string): Promise<Stored | undefined>;
  runningOf(agentId: string): Promise<number>;
  // An event of a source of its own, as a webhook stores it; its id.
  addEvent(tenantId: string, payload: Record<string, unknown>): Promise<string>;
  // Moves an agent's update time, as an edit does.
  touchAgent(id: string, updateTime: number): Promise<void>;
  // The store's count of the tenant's queued runs (its quota's).
  queuedCount(tenantId: string): Promise<number>;
  // Deletes a run as SQL would, past the store.
  deleteRun(id: string): Promise<void>;
  // Ends every queued and running run, so that a test starts with none.
  clear(): Promise<void>;
  close(): Promise<void>;
}

const CLEAR = "update runs set status = 'cancelled', lease_owner = null, lease_expire_time = null where status in ('queued', 'running')";

async function sqliteEngine(): Promise<Engine> {
  const dir = mkdtempSync(join(tmpdir(), "agentplane-queue-"));
  const path = join(dir, "agentplane.db");
  const store = createSqliteStore({ path });
  const replicas = [store];
  const reader = new Database(path, { readonly: true });
  const raw = (store.db as unknown as { $client: Database.Database }).$client;
  const now = Date.now();
  return {
    queue: store.queue,
    replica() {
      const s = createSqliteStore({ path, migrate: false });
      replicas.push(s);
      return s.queue;
    },
    addTenant: async (id) => void raw.prepare("insert into tenants (id, slug, create_time, update_time) values (?, ?, ?, ?)").run(id, id, now, now),
    addAgent: async (tenantId, id, cap = null) =>
      void raw
        .prepare(
          `insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, max_concurrent_runs, enabled, create_time, update_time)
           values (?, ?, ?, '{"skillIds":[],"allowedTools":{},"steps":[]}', 16, 120000, ?, 1, ?, ?)`,
        )
        .run(id, tenantId, id, cap, now, now),
    async read(id) {
      const r = reader
        .prepare(
          `select status, attempt, lease_owner as leaseOwner, lease_expire_time as leaseExpireTime, start_time as startTime,
             end_time as endTime, error, steps, output, update_time as updateTime from runs where id = ?`,
        )
        .get(id) as (Stored & { steps: string; output: string | null }) | undefined;
      return r && { ...r, steps: JSON.parse(r.steps), output: r.output === null ? null : JSON.parse(r.output) };
    },
    clear: async () => void raw.prepare(CLEAR).run(),
    runningOf: async (agentId) =>
      (reader.prepare("select count(*) as n from runs where status = 'running' and agent_id = ?").get(agentId) as { n: number }).n,
    async addEvent(tenantId, payload) {
      const source = newId("src");
      const event = newId("evt");
      raw.prepare("insert into webhook_sources (id, tenant_id, name, enabled, kind, create_time, update_time) values (?, ?, ?, 1, 'envelope', ?, ?)").run(source, tenantId, source, now, now);
      raw
        .prepare(
          `insert into events (id, tenant_id, source_id, event_type, payload, receive_time, matched_trigger_ids, create_time, update_time)
           values (?, ?, ?, 'order.created', ?, ?, '[]', ?, ?)`,
        )
        .run(event, tenantId, source, JSON.stringify(payload), now, now, now);
      return event;
    },
    touchAgent: async (id, updateTime) => void raw.prepare("update agents set update_time = ? where id = ?").run(updateTime, id),
    queuedCount: (tenantId) => store.runs.queuedCount(tenantId),
    deleteRun: async (id) => void raw.prepare("delete from runs where id = ?").run(id),
    async close() {
      reader.close();
      for (const s of replicas) await s.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresEngine(): Promise<Engine> {
  const database = await createTestDatabase();
  const main = openPostgres({ url: database.url, poolSize: 4 });
  await migratePostgres(main);
  const reader = openPostgres({ url: database.url, poolSize: 1 });
  const pools: OpenedPostgres[] = [main, reader];
  const now = Date.now();
  return {
    queue: createPgRunQueue(main.sql),
    replica() {
      const p = openPostgres({ url: database.url, poolSize: 2 });
      pools.push(p);
      return createPgRunQueue(p.sql);
    },
    addTenant: async (id) => void (await main.sql`insert into tenants (id, slug, create_time, update_time) values (${id}, ${id}, ${now}, ${now})`),
    addAgent: async (tenantId, id, cap = null) =>
      void (await main.sql`
        insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, max_concurrent_runs, enabled, create_time, update_time)
        values (${id}, ${tenantId}, ${id}, '{"skillIds":[],"allowedTools":{},"steps":[]}', 16, 120000, ${cap}, true, ${now}, ${now})`),
    async read(id) {
      const [r] = await reader.sql<Stored[]>`
        select status, attempt, lease_owner as "leaseOwner", lease_expire_time as "leaseExpireTime", start_time as "startTime",
          end_time as "endTime", error, steps, output, update_time as "updateTime" from runs where id = ${id}`;
      return r;
    },
    clear: async () => void (await main.sql.unsafe(CLEAR)),
    async runningOf(agentId) {
      const [r] = await reader.sql<{ n: number }[]>`select count(*)::int as n from runs where status = 'running' and agent_id = ${agentId}`;
      return r!.n;
    },
    async addEvent(tenantId, payload) {
      const source = newId("src");
      const event = newId("evt");
      await main.sql`insert into webhook_sources (id, tenant_id, name, enabled, kind, create_time, update_time)
        values (${source}, ${tenantId}, ${source}, true, 'envelope', ${now}, ${now})`;
      await main.sql`insert into events (id, tenant_id, source_id, event_type, payload, receive_time, matched_trigger_ids, create_time, update_time)
        values (${event}, ${tenantId}, ${source}, 'order.created', ${JSON.stringify(payload)}::jsonb, ${now}, '[]', ${now}, ${now})`;
      return event;
    },
    touchAgent: async (id, updateTime) => void (await main.sql`update agents set update_time = ${updateTime} where id = ${id}`),
    queuedCount: (tenantId) => queuedCount(reader.sql, tenantId),
    deleteRun: async (id) => void (await main.sql`delete from runs where id = ${id}`),
    async close() {
      for (const p of pools) await p.sql.end({ timeout: 5 });
      await database.drop();
    },
  };
}

const LEASE = 30_000;
const ok: RunOutcome = { status: "succeeded", steps: [], output: { ok: true }, error: "" };

// Owner-independent view of a claim: ids in id order.
const ids = (rows: RunRow[]) => rows.map((r) => r.id).sort();

describe.each([
  ["SQLite", sqliteEngine],
  ["PostgreSQL", postgresEngine],
])("run queue on %s", (name, open) => {
  let e: Engine;
  let tenant: string;
  let agent: string;

  beforeAll(async () => {
    e = await open();
  });
  afterAll(() => e.close());

  // Every test starts with no run queued or running, and with a tenant and
  // an agent of its own.
  beforeEach(async () => {
    await e.clear();
    tenant = newId("ten");
    agent = newId("agt");
    await e.addTenant(tenant);
    await e.addAgent(tenant, agent);
  });

  const runRow = (tenantId: string, agentId: string, input: unknown = null) => {
    const t = Date.now();
    return { id: newId("run"), tenantId, agentId, input, status: "queued" as const, steps: [], createTime: t, updateTime: t };
  };
  async function queue(n: number, tenantId = tenant, agentId = agent): Promise<string[]> {
    const rows = Array.from({ length: n }, (_, i) => runRow(tenantId, agentId, { i }));
    for (let i = 0; i < rows.length; i += 1000) expect(await e.queue.insertMany(rows.slice(i, i + 1000))).toBe(true);
    return rows.map((r) => r.id);
  }
  it("hands the trace context a run was queued with to whoever claims it", async () => {
    const traceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const traced = { ...runRow(tenant, agent), traceParent };
    const untraced = runRow(tenant, agent);
    expect(await e.queue.insertMany([traced, untraced])).toBe(true);
    const claimed = await e.replica().claim("w1", 2, LEASE, 3, Date.now(), []);
    expect(claimed.map((r) => [r.id, r.traceParent]).sort()).toEqual([[traced.id, traceParent], [untraced.id, null]].sort());
  });

  it(`hands out with each run ${name === "PostgreSQL" ? "its event and its agent's update time (one round trip per claim)" : "no context (reads are calls, not round trips)"}`, async () => {
    const event = await e.addEvent(tenant, { order: 7 });
    await e.touchAgent(agent, 1234);
    const t = Date.now();
    const fromEvent = { ...runRow(tenant, agent), eventId: event };
    const direct = runRow(tenant, agent);
    expect(await e.queue.insertMany([fromEvent, direct])).toBe(true);
    const claimed = await e.queue.claim("w1", 2, LEASE, 3, t, []);
    const contexts = Object.fromEntries(claimed.map((r) => [r.id, r.context]));
    if (name === "SQLite") expect(contexts).toEqual({ [fromEvent.id]: undefined, [direct.id]: undefined });
    else
      expect(contexts).toEqual({
        [fromEvent.id]: { agentUpdateTime: 1234, event: { id: event, eventType: "order.created", payload: { order: 7 }, sourceId: expect.any(String), receiveTime: expect.any(Number) } },
        [direct.id]: { agentUpdateTime: 1234, event: null },
      });
  });

  describe("leases", () => {
    it("tells when the earliest lease expires", async () => {
      expect(await e.queue.nextLeaseExpiry()).toBeUndefined();
      await queue(2);
      const t0 = Date.now();
      await e.queue.claim("w1", 1, 500, 3, t0, []);
      await e.queue.claim("w2", 1, 200, 3, t0, []);
      expect(await e.queue.nextLeaseExpiry()).toBe(t0 + 200);
    });

    it("claims the oldest queued run with a lease and one attempt, and not twice while the lease is held", async () => {
      const [first, second] = await queue(2);
      const t0 = Date.now();
      const got = await e.queue.claim("w1", 1, 1000, 3, t0, []);
      expect(got).toEqual([expect.objectContaining({ id: first, status: "running", attempt: 1, leaseOwner: "w1", leaseExpireTime: t0 + 1000, startTime: t0 })]);
      expect(ids(await e.replica().claim("w2", 5, 1000, 3, t0 + 999, []))).toEqual([second]);
      expect(await e.queue.claim("w3", 5, 1000, 3, t0 + 999, [])).toEqual([]);
      expect(await e.read(first!)).toMatchObject({ status: "running", attempt: 1, leaseOwner: "w1", leaseExpireTime: t0 + 1000 });
    });

    it("hands a dead owner's run to another after the lease; the dead owner can no longer extend, record or finish it", async () => {
      const [id] = await queue(1);
      const t0 = Date.now();
      await e.queue.claim("dead", 1, 100, 3, t0, []);
      const again = await e.replica().claim("live", 1, 100, 3, t0 + 100, []);
      expect(again.map((r) => [r.id, r.attempt, r.leaseOwner, r.startTime])).toEqual([[id, 2, "live", t0]]);
      expect(await e.queue.heartbeat("dead", [id!], 100, t0 + 101)).toEqual(new Set());
      expect(await e.queue.recordSteps("dead", id!, [], t0 + 101)).toBe(false);
      expect(await e.queue.finish("dead", id!, { status: "failed", steps: [], error: "late" }, t0 + 101)).toBe(false);
      expect(await e.queue.finish("live", id!, ok, t0 + 102)).toBe(true);
      expect(await e.read(id!)).toMatchObject({ status: "succeeded", attempt: 2, leaseOwner: null, leaseExpireTime: null, endTime: t0 + 102, output: { ok: true } });
    });

    it("hands a run claimed again the steps its earlier attempt recorded, which durable steps resume from", async () => {
      const [id] = await queue(1);
      const t0 = Date.now();
      await e.queue.claim("dead", 1, 100, 3, t0, []);
      const steps = [
        { kind: "tool_call" as const, skillId: "s", tool: "t", arguments: { a: 1 }, result: { sum: 2 }, error: "", startTime: t0, endTime: t0 + 1, status: "succeeded" as const, attempt: 1, worker: "dead", key: "k0" },
        { kind: "tool_call" as const, skillId: "s", tool: "u", arguments: {}, error: "", startTime: t0 + 1, status: "running" as const, attempt: 1, worker: "dead", key: "k1" },
      ];
      expect(await e.queue.recordSteps("dead", id!, steps, t0 + 2)).toBe(true);
      const again = await e.replica().claim("live", 1, 100, 3, t0 + 100, []);
      expect(again.map((r) => [r.id, r.attempt, r.steps])).toEqual([[id, 2, steps]]);
      // Given back (a graceful stop), it keeps them too.
      await e.queue.release("live", [id!], t0 + 101);
      expect((await e.queue.claim("next", 1, 100, 3, t0 + 102, [])).map((r) => r.steps)).toEqual([steps]);
    });

    it("fails a run whose lease expired on its last attempt, with the worker_lost error, and never hands it out again", async () => {
      const [id] = await queue(1);
      const t0 = Date.now();
      await e.queue.claim("w1", 1, 10, 2, t0, []);
      await e.queue.claim("w2", 1, 10, 2, t0 + 10, []);
      expect(await e.queue.claim("w3", 1, 10, 2, t0 + 20, [])).toEqual([]);
      expect(await e.read(id!)).toEqual(
        expect.objectContaining({
          status: "failed",
          attempt: 2,
          leaseOwner: null,
          leaseExpireTime: null,
          endTime: t0 + 20,
          error:
            "worker_lost: the lease expired on the last attempt; the run's worker stopped or stalled before finishing each attempt",
        }),
      );
      expect(await e.queue.claim("w4", 1, 10, 2, t0 + 1000, [])).toEqual([]);
    });

    it("does not give an owner back an expired run it still executes, but does one it does not", async () => {
      const [executing, abandoned] = await queue(2);
      const t0 = Date.now();
      expect(ids(await e.queue.claim("w1", 2, 10, 5, t0, []))).toEqual([executing, abandoned]);
      expect(ids(await e.queue.claim("w1", 5, 10, 5, t0 + 10, [executing!]))).toEqual([abandoned]);
      // Another owner takes the run whose heartbeat fell behind.
      expect(ids(await e.queue.claim("w2", 5, 10, 5, t0 + 10, []))).toEqual([executing]);
    });

    it("extends held leases on heartbeat, and only those of the owner", async () => {
      const [a, b] = await queue(2);
      const t0 = Date.now();
      await e.queue.claim("w1", 1, 100, 3, t0, []);
      await e.queue.claim("w2", 1, 100, 3, t0, []);
      expect(await e.queue.heartbeat("w1", [a!, b!], 1000, t0 + 50)).toEqual(new Set([a]));
      expect(await e.read(a!)).toMatchObject({ leaseExpireTime: t0 + 1050 });
      expect(await e.read(b!)).toMatchObject({ leaseExpireTime: t0 + 100 });
      expect(ids(await e.queue.claim("w3", 5, 100, 3, t0 + 100, []))).toEqual([b]);
    });

    it("records steps only for the lease holder", async () => {
      const [id] = await queue(1);
      const t0 = Date.now();
      await e.queue.claim("w1", 1, LEASE, 3, t0, []);
      const steps = [{ kind: "tool_call" as const, skillId: "s", tool: "t", arguments: { a: 1 }, error: "", startTime: t0, attempt: 1, worker: "w1" }];
      expect(await e.queue.recordSteps("w2", id!, steps, t0 + 1)).toBe(false);
      expect(await e.queue.recordSteps("w1", id!, steps, t0 + 1)).toBe(true);
      expect(await e.read(id!)).toMatchObject({ status: "running", steps });
    });

    it("keeps a step's status and call attempts, and moves update_time forward on every step write and the finish, even within one millisecond", async () => {
      const [id] = await queue(1);
      const t0 = Date.now();
      await e.queue.claim("w1", 1, LEASE, 3, t0, []);
      const step = { kind: "tool_call" as const, skillId: "s", tool: "t", arguments: {}, error: "", startTime: t0, attempt: 1, worker: "w1" };
      const running = [{ ...step, status: "running" as const, callAttempts: [{ startTime: t0, error: "" }] }];
      const retried = [{ ...step, status: "running" as const, callAttempts: [{ startTime: t0, endTime: t0 + 1, error: "skill_unreachable: refused" }, { startTime: t0 + 201, error: "" }] }];
      const ended = [{ ...retried[0]!, status: "succeeded" as const, endTime: t0 + 1, result: { ok: true }, callAttempts: [retried[0]!.callAttempts[0]!, { startTime: t0 + 1, endTime: t0 + 1, error: "" }] }];
      const seen: number[] = [];
      for (const steps of [running, retried, ended]) {
        expect(await e.queue.recordSteps("w1", id!, steps, t0 + 1)).toBe(true);
        const row = await e.read(id!);
        expect(row).toMatchObject({ status: "running", steps });
        seen.push(row!.updateTime);
      }
      expect(await e.queue.finish("w1", id!, { ...ok, steps: ended }, t0 + 1)).toBe(true);
      seen.push((await e.read(id!))!.updateTime);
      expect(seen).toEqual([t0 + 1, t0 + 2, t0 + 3, t0 + 4]);
      expect(await e.queue.recordSteps("w1", id!, running, t0 + 1000)).toBe(false);
    });

    it("releases held runs to the queue with the attempt refunded", async () => {
      const [id] = await queue(1);
      const t0 = Date.now();
      await e.queue.claim("w1", 1, LEASE, 3, t0, []);
      await e.queue.release("w2", [id!], t0 + 1);
      expect(await e.read(id!)).toMatchObject({ status: "running", leaseOwner: "w1" });
      await e.queue.release("w1", [id!], t0 + 1);
      expect(await e.read(id!)).toMatchObject({ status: "queued", attempt: 0, leaseOwner: null, leaseExpireTime: null, startTime: null });
      expect((await e.replica().claim("w2", 1, LEASE, 3, t0 + 2, [])).map((r) => [r.id, r.attempt])).toEqual([[id, 1]]);
    });

    it("cancels queued and running runs of the tenant only; the holder loses the run", async () => {
      const [running, queued] = await queue(2);
      const t0 = Date.now();
      await e.queue.claim("w1", 1, LEASE, 3, t0, []);
      expect(await e.queue.cancel(newId("ten"), running!, t0 + 1)).toBeUndefined();
      expect(await e.queue.cancel(tenant, running!, t0 + 1)).toMatchObject({ id: running, status: "cancelled", endTime: t0 + 1, leaseOwner: null });
      expect(await e.queue.heartbeat("w1", [running!], LEASE, t0 + 2)).toEqual(new Set());
      expect(await e.queue.finish("w1", running!, ok, t0 + 2)).toBe(false);
      expect(await e.read(running!)).toMatchObject({ status: "cancelled", attempt: 1, output: null });
      expect(await e.queue.cancel(tenant, queued!, t0 + 3)).toMatchObject({ id: queued, status: "cancelled", attempt: 0 });
      expect(await e.queue.cancel(tenant, queued!, t0 + 4)).toBeUndefined();
      expect(await e.queue.claim("w2", 5, LEASE, 3, t0 + 5, [])).toEqual([]);
    });

  });

  describe("queueing", () => {
    it("refuses a batch that would take the tenant past its queued-run quota, and stores none of it", async () => {
      expect(await e.queue.insertMany([runRow(tenant, agent), runRow(tenant, agent)], 3)).toBe(true);
      const refused = [runRow(tenant, agent), runRow(tenant, agent)];
      expect(await e.queue.insertMany(refused, 3)).toBe(false);
      expect(await e.read(refused[0]!.id)).toBeUndefined();
      expect(await e.queue.insertMany([runRow(tenant, agent)], 3)).toBe(true);
    });

    it("counts a tenant's queued runs through every change of their status, its own only", async () => {
      const other = newId("ten");
      await e.addTenant(other);
      await queue(2, other);
      const [a] = await queue(5);
      expect([await e.queuedCount(tenant), await e.queuedCount(other)]).toEqual([5, 2]);
      const t0 = Date.now();
      const claimed = await e.queue.claim("w1", 2, 100, 3, t0, []);
      const mine = claimed.filter((r) => r.tenantId === tenant).length;
      expect(await e.queuedCount(tenant)).toBe(5 - mine);
      await e.queue.release("w1", claimed.map((r) => r.id), t0 + 1);
      expect([await e.queuedCount(tenant), await e.queuedCount(other)]).toEqual([5, 2]);
      await e.queue.cancel(tenant, a!, t0 + 2);
      expect(await e.queuedCount(tenant)).toBe(4);
      // Claimed, its lease expired and taken over, then finished: counted out once.
      await e.clear();
      const [g] = await queue(1);
      await e.queue.claim("w1", 1, 100, 3, t0, []);
      expect(await e.queuedCount(tenant)).toBe(0);
      const [retaken] = await e.queue.claim("w2", 1, LEASE, 3, t0 + 200, []);
      expect(retaken?.id).toBe(g);
      expect(await e.queue.finish("w2", g!, ok, t0 + 201)).toBe(true);
      expect(await e.queuedCount(tenant)).toBe(0);
      await queue(3);
      const [h] = await queue(1);
      await e.deleteRun(h!);
      expect([await e.queuedCount(tenant), await e.queuedCount(other)]).toEqual([3, 0]);
    });

    it("keeps the quota when replicas queue for one tenant at once", async () => {
      const replicas = [e.queue, e.replica(), e.replica(), e.replica()];
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) => replicas[i % replicas.length]!.insertMany([runRow(tenant, agent), runRow(tenant, agent)], 25)),
      );
      expect(results.filter(Boolean)).toHaveLength(12);
    });

    it("stores the run input as given, a JSON null and a string included", async () => {
      const rows = [runRow(tenant, agent, { nested: [1, "two", null] }), runRow(tenant, agent, "text"), runRow(tenant, agent, null)];
      expect(await e.queue.insertMany(rows)).toBe(true);
      const claimed = await e.queue.claim("w1", 3, LEASE, 3, Date.now(), []);
      expect(claimed.map((r) => r.input).sort()).toEqual([{ nested: [1, "two", null] }, "text", null].sort());
    });
  });

  describe("concurrent claimers", () => {
    it("never hand one run to two claimers", async () => {
      const queued = await queue(500);
      const claimers = [e.queue, e.replica(), e.replica(), e.replica()];
      const claimed = new Map<string, number>();
      await Promise.all(
        claimers.map(async (q, n) => {
          for (let empty = 0; empty < 3; ) {
            const got = await q.claim(`w${n}`, 7, LEASE, 3, Date.now(), []);
            empty = got.length ? 0 : empty + 1;
            for (const r of got) claimed.set(r.id, (claimed.get(r.id) ?? 0) + 1);
            await Promise.all(got.map((r) => q.finish(`w${n}`, r.id, ok, Date.now())));
          }
        }),
      );
      expect([...claimed.keys()].sort()).toEqual([...queued].sort());
      expect([...claimed.values()].every((n) => n === 1)).toBe(true);
    });
  });

  describe("fairness between tenants", () => {
    it("starts another tenant's single run in the next claim while one tenant has 10,000 queued", async () => {
      const other = newId("ten");
      const otherAgent = newId("agt");
      await e.addTenant(other);
      await e.addAgent(other, otherAgent);
      await queue(10_000);
      // Nothing of either tenant is running: a claim of two takes one of each.
      const [single] = await queue(1, other, otherAgent);
      const t0 = Date.now();
      const two = await e.queue.claim("w1", 2, LEASE, 3, t0, []);
      expect(two.map((r) => r.tenantId).sort()).toEqual([tenant, other].sort());
      expect(ids(two)).toContain(single);
      // More of the backlogged tenant's runs start (nothing else is queued).
      expect((await e.queue.claim("w1", 3, LEASE, 3, t0, [])).map((r) => r.tenantId)).toEqual([tenant, tenant, tenant]);
      // The backlogged tenant has runs executing: the other tenant's next run
      // goes first even in a claim of one.
      const [next] = await queue(1, other, otherAgent);
      expect(ids(await e.queue.claim("w1", 1, LEASE, 3, t0, []))).toEqual([next]);
    });

    it("takes runs round-robin between tenants, oldest first within each", async () => {
      const tenants = [tenant, newId("ten"), newId("ten")];
      const agents = [agent, newId("agt"), newId("agt")];
      for (let i = 1; i < 3; i++) {
        await e.addTenant(tenants[i]!);
        await e.addAgent(tenants[i]!, agents[i]!);
      }
      const a = await queue(5, tenants[0], agents[0]);
      const b = await queue(5, tenants[1], agents[1]);
      const c = await queue(1, tenants[2], agents[2]);
      expect(ids(await e.queue.claim("w1", 6, LEASE, 3, Date.now(), []))).toEqual([a[0], a[1], a[2], b[0], b[1], c[0]].sort());
      // Now A has 3 running and B 2: B's next run goes before A's.
      expect(ids(await e.queue.claim("w1", 1, LEASE, 3, Date.now(), []))).toEqual([b[2]]);
    });
  });

  describe("max_concurrent_runs", () => {
    it("leaves an agent's runs queued while it has that many running, without holding back the tenant's other agents", async () => {
      const capped = newId("agt");
      await e.addAgent(tenant, capped, 1);
      const held = await queue(3, tenant, capped);
      const [free] = await queue(1);
      const t0 = Date.now();
      expect(ids(await e.queue.claim("w1", 10, LEASE, 3, t0, []))).toEqual([held[0], free].sort());
      const [later] = await queue(1);
      expect(ids(await e.queue.claim("w1", 10, LEASE, 3, t0, []))).toEqual([later]);
      expect(await e.read(held[1]!)).toMatchObject({ status: "queued", attempt: 0 });
      expect(await e.queue.finish("w1", held[0]!, ok, t0 + 1)).toBe(true);
      expect(ids(await e.queue.claim("w1", 10, LEASE, 3, t0 + 2, []))).toEqual([held[1]]);
    });

    it("counts an expired lease of the agent as running, and hands it on", async () => {
      const capped = newId("agt");
      await e.addAgent(tenant, capped, 2);
      const held = await queue(4, tenant, capped);
      const t0 = Date.now();
      expect(ids(await e.queue.claim("w1", 10, 100, 3, t0, []))).toEqual([held[0], held[1]]);
      expect(ids(await e.queue.claim("w2", 10, 100, 3, t0 + 100, []))).toEqual([held[0], held[1]]);
      expect(await e.runningOf(capped)).toBe(2);
    });

    it("holds with claimers racing on connections of their own", async () => {
      const capped = newId("agt");
      await e.addAgent(tenant, capped, 2);
      const queued = await queue(24, tenant, capped);
      const claimers = [e.queue, e.replica(), e.replica(), e.replica()];
      const done: string[] = [];
      // Every round, all claimers at once while the agent has none running:
      // together they take exactly two.
      while (done.length < queued.length) {
        const now = Date.now();
        const got = await Promise.all(claimers.map((q, n) => q.claim(`w${n}`, 3, LEASE, 3, now, [])));
        expect(got.flat()).toHaveLength(2);
        expect(await e.runningOf(capped)).toBe(2);
        for (const [n, rows] of got.entries())
          for (const r of rows) {
            expect(await claimers[n]!.finish(`w${n}`, r.id, ok, now)).toBe(true);
            done.push(r.id);
          }
      }
      expect(done.sort()).toEqual([...queued].sort());
    });
  });

  describe("grouped run-state writes", () => {
    it("resolves each finish with its own result, durable for every other connection once resolved", async () => {
      const queued = await queue(40);
      const t0 = Date.now();
      const held = await e.queue.claim("w1", 40, LEASE, 3, t0, []);
      expect(held).toHaveLength(40);
      const checks = queued.map(async (id, i) => {
        // Every third one is finished by an owner that does not hold it.
        const owner = i % 3 === 0 ? "stranger" : "w1";
        const outcome = { status: "succeeded" as const, steps: [], output: { i }, error: "" };
        const finished = await e.queue.finish(owner, id, outcome, t0 + 1);
        expect(finished).toBe(owner === "w1");
        expect(await e.read(id)).toMatchObject(owner === "w1" ? { status: "succeeded", output: { i } } : { status: "running" });
      });
      // Step records of the same runs, asked after the finishes: recorded only
      // on the runs the finish did not end.
      const steps = queued.map((id) => e.queue.recordSteps("w1", id, [], t0 + 1));
      await Promise.all(checks);
      expect(await Promise.all(steps)).toEqual(queued.map((_, i) => i % 3 === 0));
    });
  });
});

describe("PostgreSQL notifications", () => {
  let e: Engine;
  let listener: OpenedPostgres;
  const heard: [string, string][] = [];

  beforeAll(async () => {
    const database = await createTestDatabase();
    const opened = openPostgres({ url: database.url, poolSize: 2 });
    await migratePostgres(opened);
    await opened.sql.end();
    listener = openPostgres({ url: database.url, poolSize: 1 });
    await listener.sql.listen(CHANNELS.runsQueued, (payload) => heard.push([CHANNELS.runsQueued, payload]));
    await listener.sql.listen(CHANNELS.runCancelled, (payload) => heard.push([CHANNELS.runCancelled, payload]));
    e = await postgresFrom(database);
  });
  afterAll(async () => {
    await listener.sql.end();
    await e.close();
  });

  // The engine above on an existing database.
  async function postgresFrom(database: Awaited<ReturnType<typeof createTestDatabase>>): Promise<Engine> {
    const main = openPostgres({ url: database.url, poolSize: 2 });
    // As the store signals its queue's writes: NOTIFY after the commit.
    const queue = signalledQueue(createPgRunQueue(main.sql), new ChangeNotifier(main.sql, new SignalHub()));
    return {
      queue,
      replica: () => queue,
      addTenant: async (id) => void (await main.sql`insert into tenants (id, slug, create_time, update_time) values (${id}, ${id}, 0, 0)`),
      addAgent: async (tenantId, id) =>
        void (await main.sql`
          insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, enabled, create_time, update_time)
          values (${id}, ${tenantId}, ${id}, '{}', 16, 120000, true, 0, 0)`),
      read: () => Promise.reject(new Error("unused")),
      runningOf: () => Promise.reject(new Error("unused")),
      addEvent: () => Promise.reject(new Error("unused")),
      touchAgent: () => Promise.reject(new Error("unused")),
      queuedCount: () => Promise.reject(new Error("unused")),
      deleteRun: () => Promise.reject(new Error("unused")),
      clear: () => Promise.reject(new Error("unused")),
        async close() {
        await main.sql.end();
        await database.drop();
      },
    };
  }

  const waitFor = async (what: [string, string]) => {
    const deadline = Date.now() + 5000;
    while (!heard.some(([c, p]) => c === what[0] && p === what[1])) {
      if (Date.now() > deadline) throw new Error(`no notification ${JSON.stringify(what)}; heard ${JSON.stringify(heard)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    heard.length = 0;
  };

  it("tells every replica when runs are queued, released or cancelled", async () => {
    const tenant = newId("ten");
    const agent = newId("agt");
    await e.addTenant(tenant);
    await e.addAgent(tenant, agent);
    const t = Date.now();
    const rows = [0, 1].map(() => ({ id: newId("run"), tenantId: tenant, agentId: agent, status: "queued" as const, steps: [], createTime: t, updateTime: t }));
    expect(await e.queue.insertMany(rows)).toBe(true);
    await waitFor([CHANNELS.runsQueued, ""]);
    await e.queue.claim("w1", 1, LEASE, 3, t, []);
    await e.queue.release("w1", [rows[0]!.id], t);
    await waitFor([CHANNELS.runsQueued, ""]);
    await e.queue.cancel(tenant, rows[1]!.id, t);
    await waitFor([CHANNELS.runCancelled, rows[1]!.id]);
  });
});
