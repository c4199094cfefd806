// The Store contract, held by both engines alike: every case runs on SQLite
// (a temp file) and on PostgreSQL (a fresh database), with two store
// instances on one database where the case is about concurrency (two
// processes on one file; two replicas on one database).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { idFloor, newId } from "../src/lib/ids.js";
import { StoreConflictError, StoreQuotaError, StoreReferenceError, StoreUnavailableError } from "../src/store/errors.js";
import { openStore } from "../src/store/open.js";
import { queuedRun } from "../src/store/queued-run.js";
import { createPostgresStore } from "../src/store/postgres/store.js";
import type { AgentInsert, EventInsert, RunInsert, SkillInsert, TriggerInsert, WebhookSourceInsert } from "../src/store/rows.js";
import { createSqliteStore } from "../src/store/sqlite/store.js";
import type { IngestItem, RunQuery, Store } from "../src/store/store.js";
import type { RunStatus } from "../src/store/types.js";
import { createTestDatabase } from "./support/postgres.js";

const DAY = 24 * 60 * 60 * 1000;

interface Engine {
  name: "sqlite" | "postgres";
  // A database of its own; `open` gives another store instance on it.
  setup(): Promise<{ open(): Promise<Store>; teardown(): Promise<void> }>;
}

const engines: Engine[] = [
  {
    name: "sqlite",
    async setup() {
      const dir = mkdtempSync(join(tmpdir(), "agentplane-contract-"));
      const path = join(dir, "agentplane.db");
      return {
        open: () => Promise.resolve(createSqliteStore({ path })),
        teardown: async () => rmSync(dir, { recursive: true, force: true }),
      };
    },
  },
  {
    name: "postgres",
    async setup() {
      const db = await createTestDatabase();
      return { open: () => createPostgresStore({ url: db.url, poolSize: 4 }), teardown: () => db.drop() };
    },
  },
];

const now = Date.now();
const times = { createTime: now, updateTime: now };

// Names are unique in a tenant: each row its own unless the case names one.
const uniqueName = (prefix: string) => `${prefix}-${randomBytes(4).toString("hex")}`;

function agentRow(tenantId: string, patch: Partial<AgentInsert> = {}): AgentInsert {
  return {
    id: newId("agt"),
    tenantId,
    name: uniqueName("fulfil"),
    spec: { skillIds: [], allowedTools: {}, steps: [] },
    maxSteps: 10,
    timeoutMs: 1000,
    enabled: true,
    ...times,
    ...patch,
  };
}

function sourceRow(tenantId: string, patch: Partial<WebhookSourceInsert> = {}): WebhookSourceInsert {
  return { id: newId("src"), tenantId, name: uniqueName("shop"), enabled: true, tokenDigest: randomBytes(32).toString("hex"), ...times, ...patch };
}

function triggerRow(tenantId: string, agentId: string, patch: Partial<TriggerInsert> = {}): TriggerInsert {
  return { id: newId("trg"), tenantId, agentId, enabled: true, kind: "webhook", eventTypePattern: "order.*", ...times, ...patch };
}

function runRow(tenantId: string, agentId: string, patch: Partial<RunInsert> = {}): RunInsert {
  return { id: newId("run"), tenantId, agentId, status: "queued", steps: [], ...times, ...patch };
}

function ingestItem(tenantId: string, sourceId: string, agentId: string, patch: Partial<EventInsert> = {}, runs = 1): IngestItem {
  const event: EventInsert = {
    id: newId("evt"),
    tenantId,
    sourceId,
    eventType: "order.created",
    payload: { total: 250, nested: { list: [1, "two", null] } },
    receiveTime: now,
    idempotencyKey: null,
    matchedTriggerIds: [],
    ...times,
    ...patch,
  };
  return { event, runs: Array.from({ length: runs }, () => runRow(tenantId, agentId, { eventId: event.id })) };
}

describe.each(engines)("Store contract on $name", (engine) => {
  let env: Awaited<ReturnType<Engine["setup"]>>;
  // Two instances on one database: two processes (SQLite) or replicas (PostgreSQL).
  let a: Store;
  let b: Store;

  beforeAll(async () => {
    env = await engine.setup();
    a = await env.open();
    b = await env.open();
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await env?.teardown();
  });

  async function newTenant(store = a): Promise<string> {
    const id = newId("ten");
    await store.tenants.insert({ id, slug: `t-${randomBytes(4).toString("hex")}`, ...times });
    return id;
  }

  describe("tenants", () => {
    it("inserts, finds by id or slug, pages newest first, updates", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push(await newTenant());
      const row = await a.tenants.get(ids[0]!);
      expect(row).toEqual({ id: ids[0], slug: expect.stringMatching(/^t-/), displayName: "", createTime: now, updateTime: now });
      expect(await b.tenants.get(row!.slug)).toEqual(row);
      expect(await a.tenants.get("ten_missing")).toBeUndefined();
      const first = await a.tenants.list({ limit: 2 });
      expect(first.map((t) => t.id)).toEqual([...first.map((t) => t.id)].sort().reverse());
      const page = await a.tenants.list({ limit: 2, beforeId: ids[2] });
      expect(page.map((t) => t.id)).toEqual([ids[1], ids[0]]);
      expect(await a.tenants.update(ids[0]!, { displayName: "Acme", updateTime: now + 1 })).toEqual({ ...row, displayName: "Acme", updateTime: now + 1 });
      expect(await a.tenants.update("ten_missing", { displayName: "x" })).toBeUndefined();
    });

    it("refuses a taken slug with a conflict", async () => {
      const id = await newTenant();
      const { slug } = (await a.tenants.get(id))!;
      await expect(b.tenants.insert({ id: newId("ten"), slug, ...times })).rejects.toBeInstanceOf(StoreConflictError);
    });
  });

  describe("tenant-scoped repos", () => {
    it("insert, get, update and delete, each within its tenant", async () => {
      const tenantId = await newTenant();
      const other = await newTenant();
      const inserted = await a.agents.insert(agentRow(tenantId, { name: "fulfil", description: "ships orders" }));
      expect(inserted).toEqual({
        id: expect.stringMatching(/^agt_/),
        tenantId,
        name: "fulfil",
        description: "ships orders",
        instructions: "",
        spec: { skillIds: [], allowedTools: {}, steps: [] },
        modelApiKey: null,
        maxSteps: 10,
        timeoutMs: 1000,
        maxConcurrentRuns: null,
        enabled: true,
        createTime: now,
        updateTime: now,
      });
      expect(await b.agents.get(tenantId, inserted.id)).toEqual(inserted);
      expect(await b.agents.get(other, inserted.id)).toBeUndefined();

      const spec = { skillIds: ["skl_1"], allowedTools: { skl_1: ["lookup"] }, steps: [{ skillId: "skl_1", tool: "lookup", arguments: "{}" }] };
      const updated = await a.agents.update(tenantId, inserted.id, { spec, enabled: false, maxConcurrentRuns: 2, updateTime: now + 5 });
      expect(updated).toEqual({ ...inserted, spec, enabled: false, maxConcurrentRuns: 2, updateTime: now + 5 });
      expect(await b.agents.get(tenantId, inserted.id)).toEqual(updated);
      expect(await a.agents.update(other, inserted.id, { name: "stolen" })).toBeUndefined();

      expect(await a.agents.delete(other, inserted.id)).toBe(false);
      expect(await a.agents.delete(tenantId, inserted.id)).toBe(true);
      expect(await b.agents.get(tenantId, inserted.id)).toBeUndefined();
      expect(await a.agents.delete(tenantId, inserted.id)).toBe(false);
    });

    it("pages newest first by keyset, with equality filters and the events' time window", async () => {
      const tenantId = await newTenant();
      const other = await newTenant();
      const source = await a.webhookSources.insert(sourceRow(tenantId));
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const e = ingestItem(tenantId, source.id, "agt_x", { eventType: i % 2 ? "order.paid" : "order.created", receiveTime: now + i * 1000 }, 0).event;
        await a.events.insert(e);
        ids.push(e.id);
      }
      await a.events.insert(ingestItem(other, (await a.webhookSources.insert(sourceRow(other))).id, "agt_x", {}, 0).event);
      const newest = ids.slice().reverse();
      expect((await b.events.list(tenantId, { limit: 2 })).map((e) => e.id)).toEqual(newest.slice(0, 2));
      expect((await b.events.list(tenantId, { limit: 2, beforeId: newest[1] })).map((e) => e.id)).toEqual(newest.slice(2, 4));
      expect((await b.events.list(tenantId, { limit: 2, beforeId: newest[3] })).map((e) => e.id)).toEqual(newest.slice(4));
      expect((await b.events.list(tenantId, { limit: 10, where: { eventType: "order.paid" } })).map((e) => e.id)).toEqual([ids[3], ids[1]]);
      expect((await b.events.list(tenantId, { limit: 10, where: { eventType: undefined, sourceId: source.id } })).length).toBe(5);
      const window = await b.events.list(tenantId, { limit: 10, receivedAfter: now + 1000, receivedBefore: now + 3000 });
      expect(window.map((e) => e.id)).toEqual([ids[2], ids[1]]);
      const [event] = await b.events.list(tenantId, { limit: 1, beforeId: ids[1] });
      expect(event).toEqual({
        id: ids[0],
        tenantId,
        sourceId: source.id,
        eventType: "order.created",
        payload: { total: 250, nested: { list: [1, "two", null] } },
        receiveTime: now,
        idempotencyKey: null,
        matchedTriggerIds: [],
        createTime: now,
        updateTime: now,
      });

      const agent = await a.agents.insert(agentRow(tenantId, { enabled: false }));
      await a.agents.insert(agentRow(tenantId));
      expect((await b.agents.list(tenantId, { limit: 10, where: { enabled: false } })).map((x) => x.id)).toEqual([agent.id]);
    });

    it("lists runs by agent, status and creation window (ids made at creation), newest first", async () => {
      const tenantId = await newTenant();
      const other = await newTenant();
      const [x, y] = [await a.agents.insert(agentRow(tenantId)), await a.agents.insert(agentRow(tenantId))];
      // Ids made 1 s apart, as runs created then would have them.
      const made = (ms: number) => `${idFloor("run", ms).slice(0, 18)}7abc-8def-${randomBytes(6).toString("hex")}`;
      const rows = [0, 1, 2, 3].map((i) =>
        runRow(tenantId, i % 2 ? y.id : x.id, { id: made(now + i * 1000), status: i === 2 ? "failed" : "succeeded", createTime: now + i * 1000 }),
      );
      for (const r of rows) await a.runs.insert(r);
      await a.runs.insert(runRow(other, (await a.agents.insert(agentRow(other))).id, { id: made(now + 1500) }));
      const ids = (q: RunQuery) => b.runs.list(tenantId, q).then((r) => r.map((x) => x.id));
      const [r0, r1, r2, r3] = rows.map((r) => r.id);
      expect(await ids({ limit: 10, createdAfter: now + 1000, createdBefore: now + 3000 })).toEqual([r2, r1]);
      expect(await ids({ limit: 10, createdAfter: now + 1000, where: { agentId: x.id } })).toEqual([r2]);
      expect(await ids({ limit: 10, where: { status: "failed" } })).toEqual([r2]);
      expect(await ids({ limit: 1, createdBefore: now + 3000, beforeId: r2 })).toEqual([r1]);
      expect(await ids({ limit: 10, where: { agentId: y.id }, createdBefore: now + 5000 })).toEqual([r3, r1]);
      expect(await ids({ limit: 10, createdAfter: now + 4000 })).toEqual([]);
      expect(await ids({ limit: 10, createdBefore: now + 1000 })).toEqual([r0]);
      // Queued runs and the others are on different partial indexes (list-query.ts).
      const queued = runRow(tenantId, x.id, { id: made(now + 4500), createTime: now + 4500 });
      await a.runs.insert(queued);
      expect(await ids({ limit: 10, where: { status: "queued" } })).toEqual([queued.id]);
      expect(await ids({ limit: 10, where: { status: "succeeded" } })).toEqual([r3, r1, r0]);
      expect(await ids({ limit: 10, where: { status: "queued", agentId: y.id } })).toEqual([]);
      expect(await ids({ limit: 10, where: { status: "succeeded", agentId: y.id } })).toEqual([r3, r1]);
      // Unfiltered, the runs of every status come in one id order, read a
      // status at a time (RUN_LIST_SPLIT): newest first page by page, and oldest first.
      const running = runRow(tenantId, y.id, { id: made(now + 2500), status: "running", createTime: now + 2500 });
      const cancelled = runRow(tenantId, y.id, { id: made(now + 500), status: "cancelled", createTime: now + 500 });
      await a.runs.insert(running);
      await a.runs.insert(cancelled);
      const all = [queued.id, r3, running.id, r2, r1, cancelled.id, r0];
      expect(await ids({ limit: 10 })).toEqual(all);
      const paged: string[] = [];
      // Bounded: a cursor that does not move would read the same page forever.
      for (let page = await ids({ limit: 2 }), n = 0; page.length && n < all.length; n++) {
        paged.push(...page);
        page = await ids({ limit: 2, beforeId: page.at(-1)! });
      }
      expect(paged).toEqual(all);
      expect(await ids({ limit: 3, after: { id: cancelled.id } })).toEqual([r1, r2, running.id]);
      expect(await ids({ limit: 10, createdAfter: now + 500, createdBefore: now + 3000 })).toEqual([running.id, r2, r1, cancelled.id]);
      // The status is written into the statement: only a known one.
      await expect(ids({ limit: 10, where: { status: "queued' or '1' = '1" as never } })).rejects.toThrow(/unknown run status/);
    });

    it("reads the runs changed since they were queued and those not, in one (update_time, id) order (change feeds)", async () => {
      const tenantId = await newTenant();
      const agentId = (await a.agents.insert(agentRow(tenantId))).id;
      // Queued as the service queues runs: each id made at its create time.
      const base = now + 60_000;
      const q = [2, 2, 2, 3, 6, 3, 6].map((t) => queuedRun({ tenantId, agentId, input: null }, base + t));
      for (const r of q) await a.runs.insert(r);
      // q[0] claimed at +4; q[3] given back to the queue at +5; q[5] claimed
      // and q[6] cancelled in the millisecond each was queued in, so their
      // update times are their create times; the others not changed.
      await a.runs.update(tenantId, q[0]!.id, { status: "running", attempt: 1, updateTime: base + 4 });
      await a.runs.update(tenantId, q[3]!.id, { updateTime: base + 5 });
      await a.runs.update(tenantId, q[5]!.id, { status: "running", attempt: 1, updateTime: base + 3 });
      await a.runs.update(tenantId, q[6]!.id, { status: "cancelled", updateTime: base + 6 });
      const key = (r: RunInsert, t: number) => ({ id: r.id, t });
      const order = [key(q[0]!, 4), key(q[1]!, 2), key(q[2]!, 2), key(q[3]!, 5), key(q[4]!, 6), key(q[5]!, 3), key(q[6]!, 6)]
        .sort((x, y) => x.t - y.t || (x.id < y.id ? -1 : 1))
        .map((k) => k.id);
      const feed = (value: number, id: string, limit = 10, where = {}) =>
        b.runs.list(tenantId, { limit, where, after: { by: "updateTime", value, id } }).then((r) => r.map((x) => x.id));
      expect(await feed(base, "")).toEqual(order);
      // Page by page, each from the last row's key.
      for (const limit of [1, 2]) {
        const paged: string[] = [];
        // Bounded: a cursor that does not move would read the same page forever.
        for (let from = { value: base, id: "" }, pages = 0; pages <= order.length; pages++) {
          const page = await b.runs.list(tenantId, { limit, after: { by: "updateTime", ...from } });
          paged.push(...page.map((r) => r.id));
          if (page.length < limit) break;
          from = { value: page.at(-1)!.updateTime, id: page.at(-1)!.id };
        }
        expect(paged).toEqual(order);
      }
      // From within a millisecond, and from one whose id is another part's.
      const [first, second] = [q[1]!, q[2]!].sort((x, y) => (x.id < y.id ? -1 : 1));
      expect(await feed(base + 2, first!.id)).toEqual(order.slice(order.indexOf(second!.id)));
      expect(await feed(base + 4, q[0]!.id)).toEqual(order.slice(order.indexOf(q[0]!.id) + 1));
      expect(await feed(base + 4, "")).toEqual(order.slice(order.indexOf(q[0]!.id)));
      expect(await feed(base, "", 10, { status: "queued" })).toEqual(order.filter((id) => ![q[0]!.id, q[5]!.id, q[6]!.id].includes(id)));
      expect(await feed(base, "", 10, { status: "running" })).toEqual([q[5]!.id, q[0]!.id]);
      expect(await feed(base, "", 10, { status: "cancelled" })).toEqual([q[6]!.id]);
      // And listed by status without a cursor, newest first.
      const byStatus = (status: RunStatus) => b.runs.list(tenantId, { limit: 10, where: { status } }).then((r) => r.map((x) => x.id));
      expect(await byStatus("running")).toEqual([q[0]!.id, q[5]!.id].sort().reverse());
      expect(await byStatus("cancelled")).toEqual([q[6]!.id]);
    });

    it("reads oldest first after a keyset (change feeds): runs by (update_time, id), events by id", async () => {
      const tenantId = await newTenant();
      const other = await newTenant();
      const agent = await a.agents.insert(agentRow(tenantId));
      const rows = [3000, 1000, 2000, 2000].map((t) => runRow(tenantId, agent.id, { updateTime: now + t }));
      for (const r of rows) await a.runs.insert(r);
      await a.runs.insert(runRow(other, (await a.agents.insert(agentRow(other))).id, { updateTime: now + 1500 }));
      const byChange = [rows[1]!, ...[rows[2]!, rows[3]!].sort((x, y) => (x.id < y.id ? -1 : 1)), rows[0]!].map((r) => r.id);
      const after = (value: number, id: string, limit = 10, where = {}) =>
        b.runs.list(tenantId, { limit, where, after: { by: "updateTime", value, id } }).then((r) => r.map((x) => x.id));
      expect(await after(now, "")).toEqual(byChange);
      expect(await after(now + 2000, "")).toEqual(byChange.slice(1));
      expect(await after(now + 2000, byChange[1]!)).toEqual(byChange.slice(2));
      expect(await after(now + 1000, byChange[0]!, 2)).toEqual(byChange.slice(1, 3));
      expect(await after(now, "", 10, { status: "running" })).toEqual([]);

      const source = await a.webhookSources.insert(sourceRow(tenantId));
      const events: string[] = [];
      for (let i = 0; i < 3; i++) events.push((await a.events.insert(ingestItem(tenantId, source.id, agent.id, {}, 0).event)).id);
      expect((await b.events.list(tenantId, { limit: 10, after: { id: "" } })).map((e) => e.id)).toEqual(events);
      expect((await b.events.list(tenantId, { limit: 1, after: { id: events[0]! } })).map((e) => e.id)).toEqual([events[1]]);
    });

    it("inserts within a limit once, under concurrency from two instances", async () => {
      const tenantId = await newTenant();
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).agents.insertWithin(agentRow(tenantId), 5)));
      expect(results.filter(Boolean)).toHaveLength(5);
      expect(await a.agents.list(tenantId, { limit: 100 })).toHaveLength(5);
    });

    it("maps a duplicate to a conflict and a missing reference to a reference error", async () => {
      const tenantId = await newTenant();
      const agent = await a.agents.insert(agentRow(tenantId));
      await expect(b.agents.insert({ ...agentRow(tenantId), id: agent.id })).rejects.toBeInstanceOf(StoreConflictError);
      await expect(a.agents.insert(agentRow("ten_missing"))).rejects.toBeInstanceOf(StoreReferenceError);
      await expect(a.triggers.insert(triggerRow(tenantId, "agt_missing"))).rejects.toBeInstanceOf(StoreReferenceError);
    });

    it("keeps agent, skill and source names unique per tenant, on insert and on update", async () => {
      const [tenantId, otherId] = [await newTenant(), await newTenant()];
      // Per kind: insert a row named `name` (insertWithin on `b` when `within`), rename a row.
      const kinds = {
        agents: {
          insert: (t: string, name: string, within = false) =>
            within ? b.agents.insertWithin(agentRow(t, { name }), 100) : a.agents.insert(agentRow(t, { name })),
          rename: (t: string, id: string, name: string) => b.agents.update(t, id, { name }),
        },
        skills: {
          insert: (t: string, name: string, within = false) => {
            const row: SkillInsert = { id: newId("skl"), tenantId: t, name, mcpUrl: "https://mcp.example/mcp", auth: { mode: "none" }, tools: [], ...times };
            return within ? b.skills.insertWithin(row, 100) : a.skills.insert(row);
          },
          rename: (t: string, id: string, name: string) => b.skills.update(t, id, { name }),
        },
        webhookSources: {
          insert: (t: string, name: string, within = false) =>
            within ? b.webhookSources.insertWithin(sourceRow(t, { name }), 100) : a.webhookSources.insert(sourceRow(t, { name })),
          rename: (t: string, id: string, name: string) => b.webhookSources.update(t, id, { name }),
        },
      };
      for (const { insert, rename } of Object.values(kinds)) {
        await insert(tenantId, "taken");
        await expect(insert(tenantId, "taken")).rejects.toBeInstanceOf(StoreConflictError);
        await expect(insert(tenantId, "taken", true)).rejects.toBeInstanceOf(StoreConflictError);
        await insert(otherId, "taken");
        const free = (await insert(tenantId, "free"))!;
        await expect(rename(tenantId, free.id, "taken")).rejects.toBeInstanceOf(StoreConflictError);
      }
    });
  });

  describe("members", () => {
    it("finds by subject and changes roles, keeping the last admin", async () => {
      const tenantId = await newTenant();
      const admin = await a.members.insert({ id: newId("mem"), tenantId, subject: "alice", role: "admin", ...times });
      const viewer = await a.members.insert({ id: newId("mem"), tenantId, subject: "bob", role: "viewer", ...times });
      expect(await b.members.findBySubject(tenantId, "alice")).toEqual(admin);
      expect(await b.members.findBySubject(tenantId, "carol")).toBeUndefined();
      expect(await a.members.change(tenantId, admin.id, { role: "viewer", updateTime: now + 1 })).toEqual({ outcome: "last_admin" });
      expect(await a.members.change(tenantId, admin.id, { remove: true })).toEqual({ outcome: "last_admin" });
      expect(await a.members.change(tenantId, "mem_missing", { remove: true })).toEqual({ outcome: "not_found" });
      expect(await a.members.change(tenantId, viewer.id, { role: "admin", updateTime: now + 1 })).toEqual({
        outcome: "done",
        row: { ...viewer, role: "admin", updateTime: now + 1 },
      });
      expect(await b.members.change(tenantId, admin.id, { remove: true })).toEqual({ outcome: "done", row: admin });
      expect(await a.members.list(tenantId, { limit: 10 })).toEqual([{ ...viewer, role: "admin", updateTime: now + 1 }]);
      await expect(b.members.insert({ id: newId("mem"), tenantId, subject: "bob", role: "viewer", ...times })).rejects.toBeInstanceOf(
        StoreConflictError,
      );
    });

    it("lists a subject's tenants with its roles, newest first by keyset, or every tenant", async () => {
      const subject = `user-${randomBytes(4).toString("hex")}`;
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push(await newTenant());
      const [older, middle, newest] = ids as [string, string, string];
      const stranger = await newTenant();
      await a.tenants.update(middle, { displayName: "Middle" });
      await a.members.insert({ id: newId("mem"), tenantId: older, subject, role: "admin", ...times });
      await a.members.insert({ id: newId("mem"), tenantId: middle, subject, role: "viewer", ...times });
      await a.members.insert({ id: newId("mem"), tenantId: newest, subject, role: "viewer", ...times });
      await a.members.insert({ id: newId("mem"), tenantId: stranger, subject: `${subject}-other`, role: "admin", ...times });

      const all = await b.members.memberships(subject, { limit: 10 });
      expect(all.map((m) => [m.tenant.id, m.role])).toEqual([
        [newest, "viewer"],
        [middle, "viewer"],
        [older, "admin"],
      ]);
      expect(all[1]!.tenant).toEqual({ ...(await a.tenants.get(middle))!, displayName: "Middle" });
      expect((await b.members.memberships(subject, { limit: 2 })).map((m) => m.tenant.id)).toEqual([newest, middle]);
      expect((await b.members.memberships(subject, { limit: 2, beforeTenantId: middle })).map((m) => m.tenant.id)).toEqual([older]);
      expect(await b.members.memberships("nobody", { limit: 10 })).toEqual([]);
      // A prefix of the subject is another subject.
      expect(await b.members.memberships(subject.slice(0, -1), { limit: 10 })).toEqual([]);

      const every = await b.members.memberships(subject, { limit: 1000, everyTenant: true });
      const tenants = await a.tenants.list({ limit: 1000 });
      expect(every.map((m) => m.tenant)).toEqual(tenants);
      const roles = new Map(every.map((m) => [m.tenant.id, m.role]));
      expect([roles.get(newest), roles.get(middle), roles.get(older), roles.get(stranger)]).toEqual(["viewer", "viewer", "admin", null]);
      const page = await b.members.memberships(subject, { limit: 2, everyTenant: true, beforeTenantId: newest });
      expect(page.map((m) => m.tenant.id)).toEqual(tenants.filter((t) => t.id < newest).slice(0, 2).map((t) => t.id));
    });

    it("lets only one of two admins demote themselves at once, across instances", async () => {
      for (let round = 0; round < 5; round++) {
        const tenantId = await newTenant();
        const [x, y] = await Promise.all(
          ["x", "y"].map((subject) => a.members.insert({ id: newId("mem"), tenantId, subject, role: "admin", ...times })),
        );
        const outcomes = await Promise.all([
          a.members.change(tenantId, x!.id, { role: "viewer", updateTime: now }),
          b.members.change(tenantId, y!.id, { remove: true }),
        ]);
        expect(outcomes.map((o) => o.outcome).sort()).toEqual(["done", "last_admin"]);
        expect((await a.members.list(tenantId, { limit: 10 })).filter((m) => m.role === "admin")).toHaveLength(1);
      }
    });
  });

  describe("webhooks", () => {
    let tenantId: string;
    let agentId: string;
    let sourceId: string;

    beforeAll(async () => {
      tenantId = await newTenant();
      agentId = (await a.agents.insert(agentRow(tenantId))).id;
      sourceId = (await a.webhookSources.insert(sourceRow(tenantId))).id;
    });

    it("finds a source by its token digest, or by its previous one during the grace period", async () => {
      const row = await a.webhookSources.insert(sourceRow(tenantId, { previousTokenDigest: "old-digest", previousTokenExpireTime: now + 1000 }));
      expect(await b.webhooks.findSourceByTokenDigest(row.tokenDigest!, now)).toEqual(row);
      expect(await b.webhooks.findSourceByTokenDigest("old-digest", now)).toEqual(row);
      expect(await b.webhooks.findSourceByTokenDigest("old-digest", now + 1000)).toBeUndefined();
      expect(await b.webhooks.findSourceByTokenDigest("unknown", now)).toBeUndefined();
    });

    it("finds a source by id across tenants, with a signed kind's columns and no token", async () => {
      const other = await newTenant();
      const row = await a.webhookSources.insert(
        sourceRow(other, {
          kind: "github",
          tokenDigest: null,
          signingSecret: "v1.sealed",
          previousSigningSecret: "v1.old",
          previousSigningSecretExpireTime: now + 1000,
          mapping: '{"event_type": "x.y", "payload": body}',
        }),
      );
      expect(await b.webhooks.findSourceById(row.id)).toEqual(row);
      expect(row).toMatchObject({ kind: "github", tokenDigest: null, signingSecret: "v1.sealed", mapping: '{"event_type": "x.y", "payload": body}' });
      expect(await b.webhooks.findSourceById(newId("src"))).toBeUndefined();
      // Two signed sources without tokens: a null digest is not a duplicate.
      await a.webhookSources.insert(sourceRow(other, { kind: "stripe", tokenDigest: null, signingSecret: "v1.s" }));
    });

    it("offers the enabled webhook triggers of enabled agents for the source or the whole tenant", async () => {
      const t = await newTenant();
      const agent = await a.agents.insert(agentRow(t));
      const off = await a.agents.insert(agentRow(t, { enabled: false }));
      const source = await a.webhookSources.insert(sourceRow(t));
      const otherSource = await a.webhookSources.insert(sourceRow(t));
      const forSource = await a.triggers.insert(triggerRow(t, agent.id, { sourceId: source.id, filter: "payload.total > 1" }));
      const anySource = await a.triggers.insert(triggerRow(t, agent.id, { eventTypePattern: "**" }));
      await a.triggers.insert(triggerRow(t, agent.id, { sourceId: otherSource.id }));
      await a.triggers.insert(triggerRow(t, agent.id, { enabled: false }));
      await a.triggers.insert(triggerRow(t, off.id));
      await a.triggers.insert(triggerRow(t, agent.id, { kind: "schedule", eventTypePattern: null, cron: "* * * * *", timezone: "UTC" }));
      const candidates = await b.webhooks.matchCandidates(t, source.id);
      expect(candidates.sort((x, y) => (x.id < y.id ? -1 : 1))).toEqual([forSource, anySource]);
    });

    it("reads the runs of a page of events in one call, newest first, only the tenant's", async () => {
      const two = ingestItem(tenantId, sourceId, agentId, {}, 2);
      const none = ingestItem(tenantId, sourceId, agentId, {}, 0);
      const one = ingestItem(tenantId, sourceId, agentId, {}, 1);
      for (const item of [two, none, one]) await a.webhooks.ingest(item, DAY);
      const byEvent = await b.runs.idsForEvents(tenantId, [two.event.id, none.event.id, one.event.id, "evt_missing"]);
      expect([...byEvent.keys()].sort()).toEqual([two.event.id, one.event.id].sort());
      expect(byEvent.get(two.event.id)).toEqual(await b.runs.idsForEvent(tenantId, two.event.id));
      expect(byEvent.get(one.event.id)).toEqual([one.runs[0]!.id]);
      expect((await b.runs.idsForEvents(await newTenant(), [two.event.id])).size).toBe(0);
      expect((await b.runs.idsForEvents(tenantId, [])).size).toBe(0);
    });

    it("commits the event with its runs and reports it", async () => {
      const item = ingestItem(tenantId, sourceId, agentId, {}, 2);
      expect(await a.webhooks.ingest(item, DAY)).toEqual({ duplicate: false, eventId: item.event.id });
      expect(await b.events.get(tenantId, item.event.id)).toMatchObject({ id: item.event.id, payload: item.event.payload });
      expect((await b.runs.idsForEvent(tenantId, item.event.id)).sort()).toEqual(item.runs.map((r) => r.id).sort());
      expect(await b.runs.get(tenantId, item.runs[0]!.id)).toEqual({
        ...item.runs[0],
        triggerId: null,
        input: null,
        status: "queued",
        attempt: 0,
        steps: [],
        output: null,
        error: "",
        startTime: null,
        endTime: null,
        leaseOwner: null,
        leaseExpireTime: null,
        traceParent: null,
      });
    });

    it("stores one event per key within the window and tells the duplicate", async () => {
      const first = ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-window" });
      const again = ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-window", receiveTime: now + 1000 });
      expect(await a.webhooks.ingest(first, DAY)).toEqual({ duplicate: false, eventId: first.event.id });
      expect(await b.webhooks.ingest(again, DAY)).toEqual({ duplicate: true, eventId: first.event.id });
      expect(await a.events.get(tenantId, again.event.id)).toBeUndefined();
      expect(await a.runs.get(tenantId, again.runs[0]!.id)).toBeUndefined();
      // The same key from another source is another event.
      const otherSource = (await a.webhookSources.insert(sourceRow(tenantId))).id;
      const elsewhere = ingestItem(tenantId, otherSource, agentId, { idempotencyKey: "k-window" });
      expect(await a.webhooks.ingest(elsewhere, DAY)).toEqual({ duplicate: false, eventId: elsewhere.event.id });
    });

    it("releases a key older than the window and stores the new event", async () => {
      const old = ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-old", receiveTime: now - 2 * DAY });
      await a.webhooks.ingest(old, DAY);
      const fresh = ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-old" });
      expect(await b.webhooks.ingest(fresh, DAY)).toEqual({ duplicate: false, eventId: fresh.event.id });
      expect((await a.events.get(tenantId, old.event.id))?.idempotencyKey).toBeNull();
      expect((await a.events.get(tenantId, fresh.event.id))?.idempotencyKey).toBe("k-old");
      expect(await a.runs.idsForEvent(tenantId, fresh.event.id)).toEqual([fresh.runs[0]!.id]);
    });

    it("stores one event for 50 concurrent posts of one key on two instances", async () => {
      const items = Array.from({ length: 50 }, () => ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-burst" }));
      const results = await Promise.all(items.map((item, i) => (i % 2 ? a : b).webhooks.ingest(item, DAY)));
      const stored = results.filter((r) => !r.duplicate);
      expect(stored).toHaveLength(1);
      expect(new Set(results.map((r) => r.eventId))).toEqual(new Set([stored[0]!.eventId]));
      const events = await a.events.list(tenantId, { limit: 100, where: { idempotencyKey: "k-burst" } });
      expect(events.map((e) => e.id)).toEqual([stored[0]!.eventId]);
      expect(await a.runs.idsForEvent(tenantId, stored[0]!.eventId)).toHaveLength(1);
    });

    it("settles batches that share keys in opposite orders on two instances, one event per key", async () => {
      for (let round = 0; round < 5; round++) {
        const keys = Array.from({ length: 200 }, (_, i) => `k-cross-${round}-${i}`);
        const batch = (ks: string[]) => ks.map((k) => ingestItem(tenantId, sourceId, agentId, { idempotencyKey: k }));
        const results = await Promise.all([
          ...batch(keys).map((item) => a.webhooks.ingest(item, DAY)),
          ...batch(keys.slice().reverse()).map((item) => b.webhooks.ingest(item, DAY)),
        ]);
        expect(results.filter((r) => !r.duplicate)).toHaveLength(keys.length);
      }
    });

    it("commits many concurrent ingests, each with its runs", async () => {
      const items = Array.from({ length: 200 }, (_, i) => ingestItem(tenantId, sourceId, agentId, { idempotencyKey: i % 3 ? `k-many-${i}` : null }, i % 3));
      const results = await Promise.all(items.map((item, i) => (i % 2 ? a : b).webhooks.ingest(item, DAY)));
      expect(results).toEqual(items.map((item) => ({ duplicate: false, eventId: item.event.id })));
      for (const item of items.filter((_, i) => i % 20 === 0))
        expect((await b.runs.idsForEvent(tenantId, item.event.id)).sort()).toEqual(item.runs.map((r) => r.id).sort());
    });

    it("fails a bad item alone: the others of its batch commit", async () => {
      const taken = ingestItem(tenantId, sourceId, agentId);
      await a.webhooks.ingest(taken, DAY);
      const good = [ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-good-1" }), ingestItem(tenantId, sourceId, agentId)];
      // Same event id as a stored event: a conflict, not a duplicate key.
      const clash = ingestItem(tenantId, sourceId, agentId, { id: taken.event.id, idempotencyKey: "k-clash" });
      // A run whose id a stored run has: its event is refused with it (events
      // and runs name their tenant without a foreign key, so no reference of
      // an ingest can break).
      const orphan = ingestItem(tenantId, sourceId, agentId);
      orphan.runs[0]!.id = taken.runs[0]!.id;
      const outcomes = await Promise.allSettled([good[0]!, clash, orphan, good[1]!].map((item) => a.webhooks.ingest(item, DAY)));
      expect(outcomes[0]).toEqual({ status: "fulfilled", value: { duplicate: false, eventId: good[0]!.event.id } });
      expect(outcomes[3]).toEqual({ status: "fulfilled", value: { duplicate: false, eventId: good[1]!.event.id } });
      expect(outcomes[1]).toMatchObject({ status: "rejected", reason: expect.any(StoreConflictError) });
      expect(outcomes[2]).toMatchObject({ status: "rejected", reason: expect.any(StoreConflictError) });
      expect(await b.events.get(tenantId, orphan.event.id)).toBeUndefined();
      expect(await b.events.list(tenantId, { limit: 10, where: { idempotencyKey: "k-clash" } })).toEqual([]);
      for (const item of good) expect(await b.runs.idsForEvent(tenantId, item.event.id)).toEqual([item.runs[0]!.id]);
    });

    // Items under a queued-runs cap take another path on PostgreSQL (the
    // tenant's lock, the count and the insert in one round trip): the same
    // outcomes there, in one batch.
    it("under a cap, tells a duplicate, releases an old key and fails a bad item alone, in one batch", async () => {
      const capped = (item: IngestItem): IngestItem => ({ ...item, maxQueuedRuns: 1_000_000 });
      const held = capped(ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-capped-held" }));
      const old = capped(ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-capped-old", receiveTime: now - 2 * DAY }));
      await Promise.all([a.webhooks.ingest(held, DAY), a.webhooks.ingest(old, DAY)]);
      const good = capped(ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-capped-good" }));
      const again = capped(ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-capped-held" }));
      const fresh = capped(ingestItem(tenantId, sourceId, agentId, { idempotencyKey: "k-capped-old" }));
      const clash = capped(ingestItem(tenantId, sourceId, agentId, { id: held.event.id, idempotencyKey: "k-capped-clash" }));
      const outcomes = await Promise.allSettled([good, again, fresh, clash].map((item) => a.webhooks.ingest(item, DAY)));
      expect(outcomes.slice(0, 3)).toEqual([
        { status: "fulfilled", value: { duplicate: false, eventId: good.event.id } },
        { status: "fulfilled", value: { duplicate: true, eventId: held.event.id } },
        { status: "fulfilled", value: { duplicate: false, eventId: fresh.event.id } },
      ]);
      expect(outcomes[3]).toMatchObject({ status: "rejected", reason: expect.any(StoreConflictError) });
      for (const item of [good, fresh]) expect(await b.runs.idsForEvent(tenantId, item.event.id)).toEqual([item.runs[0]!.id]);
      expect(await b.runs.idsForEvent(tenantId, again.event.id)).toEqual([]);
      expect((await b.events.get(tenantId, old.event.id))?.idempotencyKey).toBeNull();
    });

    it("admits a batch's items up to their tenant's cap and refuses the rest, on two instances at once", async () => {
      const t = await newTenant();
      const source = await a.webhookSources.insert(sourceRow(t));
      const agent = await a.agents.insert(agentRow(t));
      // Two runs each, 7 queued at most: 3 items fit.
      const items = Array.from({ length: 10 }, () => ({ ...ingestItem(t, source.id, agent.id, {}, 2), maxQueuedRuns: 7 }));
      const outcomes = await Promise.allSettled(items.map((item, i) => (i % 2 ? a : b).webhooks.ingest(item, DAY)));
      const stored = outcomes.filter((o) => o.status === "fulfilled");
      expect(stored).toHaveLength(3);
      for (const o of outcomes.filter((o) => o.status === "rejected")) expect(o).toMatchObject({ reason: expect.any(StoreQuotaError) });
      expect(await b.runs.queuedCount(t)).toBe(6);
      // Within the cap again, one fits: a batch of it alone.
      const one = { ...ingestItem(t, source.id, agent.id, {}, 1), maxQueuedRuns: 7 };
      expect(await a.webhooks.ingest(one, DAY)).toEqual({ duplicate: false, eventId: one.event.id });
      expect(await b.runs.queuedCount(t)).toBe(7);
    });

    it("counts a tenant's queued runs", async () => {
      const t = await newTenant();
      const source = await a.webhookSources.insert(sourceRow(t));
      const agent = await a.agents.insert(agentRow(t));
      await a.webhooks.ingest(ingestItem(t, source.id, agent.id, {}, 3), DAY);
      expect(await b.runs.queuedCount(t)).toBe(3);
    });
  });

  describe("schedules", () => {
    it("fires a slot once across two instances, and skips it over the queued-runs quota", async () => {
      const tenantId = await newTenant();
      const agent = await a.agents.insert(agentRow(tenantId));
      const trigger = await a.triggers.insert(triggerRow(tenantId, agent.id, { kind: "schedule", eventTypePattern: null, cron: "* * * * *", timezone: "UTC" }));
      await a.triggers.insert(triggerRow(tenantId, (await a.agents.insert(agentRow(tenantId, { enabled: false }))).id, { kind: "schedule", cron: "* * * * *" }));
      // Without a slot yet, the trigger as stored; then with its latest slot.
      expect((await b.schedules.scheduleTriggers()).filter((t) => t.tenantId === tenantId)).toStrictEqual([trigger]);
      const lastSlot = async () => (await b.schedules.scheduleTriggers()).find((t) => t.id === trigger.id)?.lastSlot;

      for (let slot = 1; slot <= 5; slot++) {
        const runs = [a, b].map(() => runRow(tenantId, agent.id, { triggerId: trigger.id, input: { slot } }));
        const outcomes = await Promise.all([a.schedules.fireSlot(trigger.id, slot * 60_000, runs[0]!), b.schedules.fireSlot(trigger.id, slot * 60_000, runs[1]!)]);
        expect(outcomes.sort()).toEqual(["fired", "taken"]);
        const stored = await Promise.all(runs.map((r) => a.runs.get(tenantId, r.id)));
        expect(stored.filter(Boolean)).toHaveLength(1);
        expect(stored.find(Boolean)).toMatchObject({ triggerId: trigger.id, input: { slot }, status: "queued" });
      }
      expect(await lastSlot()).toBe(5 * 60_000);
      expect(await a.runs.queuedCount(tenantId)).toBe(5);

      expect(await a.schedules.fireSlot(trigger.id, 6 * 60_000, runRow(tenantId, agent.id), 5)).toBe("over_quota");
      expect(await b.schedules.fireSlot(trigger.id, 6 * 60_000, runRow(tenantId, agent.id))).toBe("taken");
      expect(await lastSlot()).toBe(6 * 60_000);
      expect(await a.runs.queuedCount(tenantId)).toBe(5);
    });
  });

  describe("availability", () => {
    it("answers ping while open; a closed store is unavailable, ingest included", async () => {
      await expect(a.ping()).resolves.toBeUndefined();
      const closing = await env.open();
      const tenantId = await newTenant();
      await closing.close();
      await expect(closing.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(closing.webhooks.ingest(ingestItem(tenantId, "src_x", "agt_x"), DAY)).rejects.toBeInstanceOf(StoreUnavailableError);
    });
  });
});

// What only PostgreSQL has: replicas that learn of each other's writes, and
// the grouping visible in transaction ids.
describe("PostgreSQL store across replicas", () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let a: Store;
  let b: Store;
  let sql: postgres.Sql;

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await createPostgresStore({ url: db.url, poolSize: 4 });
    b = await createPostgresStore({ url: db.url, poolSize: 4 });
    sql = postgres(db.url, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await sql?.end();
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  // The next signal `want` accepts. The deadline is room for any load (the
  // signal comes in milliseconds on an idle machine): what it catches is a
  // signal that never comes.
  function next<T>(subscribe: (listener: (value: T) => void) => () => void, want: (value: T) => boolean = () => true): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        reject(new Error("no signal within 20 s"));
      }, 20_000);
      const off = subscribe((value) => {
        if (!want(value)) return;
        clearTimeout(timer);
        off();
        resolve(value);
      });
    });
  }

  async function tenant(): Promise<string> {
    const id = newId("ten");
    await a.tenants.insert({ id, slug: `t-${randomBytes(4).toString("hex")}`, ...times });
    return id;
  }

  it("tells another replica that a cached table changed, by the store or by hand", async () => {
    const tenantId = await tenant();
    const agentChanged = next<string | undefined>((l) => b.signals.onChanged(l), (t) => t === "agents");
    const agent = await a.agents.insert(agentRow(tenantId));
    await agentChanged;
    const sourceChanged = next<string | undefined>((l) => b.signals.onChanged(l), (t) => t === "webhook_sources");
    await a.webhookSources.insert(sourceRow(tenantId));
    await sourceChanged;
    const triggerChanged = next<string | undefined>((l) => a.signals.onChanged(l), (t) => t === "triggers");
    await b.triggers.insert(triggerRow(tenantId, agent.id));
    await triggerChanged;
    const byHand = next<string | undefined>((l) => b.signals.onChanged(l), (t) => t === "triggers");
    await sql`update triggers set enabled = false where tenant_id = ${tenantId}`;
    await byHand;
  });

  it("wakes another replica's workers when ingest queues runs", async () => {
    const tenantId = await tenant();
    const agent = await a.agents.insert(agentRow(tenantId));
    const source = await a.webhookSources.insert(sourceRow(tenantId));
    const woken = next<void>((l) => b.signals.onRunsQueued(l));
    await a.webhooks.ingest(ingestItem(tenantId, source.id, agent.id), DAY);
    await woken;
  });

  it("tells another replica's streams whose runs changed and whose events arrived, after the commit", async () => {
    const tenantId = await tenant();
    const agent = await a.agents.insert(agentRow(tenantId));
    const source = await a.webhookSources.insert(sourceRow(tenantId));
    const heard = (on: (tenantId: string, l: () => void) => () => void) => next<void>((l) => on(tenantId, l));
    const events = heard((t, l) => b.signals.onEventsAdded(t, l));
    const queued = heard((t, l) => b.signals.onRunsChanged(t, l));
    await a.webhooks.ingest(ingestItem(tenantId, source.id, agent.id), DAY);
    await Promise.all([events, queued]);
    const claimed = heard((t, l) => b.signals.onRunsChanged(t, l));
    // (Earlier tests left queued runs of other tenants.)
    const run = (await a.queue.claim("w", 100, 30_000, 3, Date.now(), [])).find((r) => r.tenantId === tenantId);
    expect(run).toBeDefined();
    await claimed;
    const finished = heard((t, l) => b.signals.onRunsChanged(t, l));
    expect(await a.queue.finish("w", run!.id, { status: "succeeded", steps: [], error: "" }, Date.now())).toBe(true);
    await finished;
    expect(b.signals.tenantListeners()).toBe(0);
  });

  it("reports that anything may have changed once its listening connection is back", async () => {
    const everything = next<string | undefined>((l) => b.signals.onChanged(l), (t) => t === undefined);
    const runs = next<void>((l) => b.signals.onRunsQueued(l));
    await sql`select pg_terminate_backend(pid) from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and query ilike 'listen%'`;
    await Promise.all([everything, runs]);
    // And it listens again.
    const tenantId = await tenant();
    const agentChanged = next<string | undefined>((l) => b.signals.onChanged(l), (t) => t === "agents");
    await a.agents.insert(agentRow(tenantId));
    await agentChanged;
  });

  it("groups concurrent ingests into few transactions", async () => {
    const tenantId = await tenant();
    const agent = await a.agents.insert(agentRow(tenantId));
    const source = await a.webhookSources.insert(sourceRow(tenantId));
    const items = Array.from({ length: 100 }, () => ingestItem(tenantId, source.id, agent.id));
    await Promise.all(items.map((item) => a.webhooks.ingest(item, DAY)));
    // Rows written by one transaction share its id (xmin).
    const [{ n }] = await sql<[{ n: number }]>`select count(distinct xmin::text)::int as n from events where tenant_id = ${tenantId}`;
    expect(n).toBeLessThanOrEqual(5);
  });

  it("answers unavailable, not never, while the database refuses connections", async () => {
    const name = new URL(db.url).pathname.slice(1);
    const adminUrl = new URL(db.url);
    adminUrl.pathname = "/postgres";
    const admin = postgres(adminUrl.toString(), { max: 1, onnotice: () => {} });
    const store = await createPostgresStore({ url: db.url, poolSize: 5, hotPathTimeoutMs: 500 });
    const tenantId = await tenant();
    const source = await a.webhookSources.insert(sourceRow(tenantId));
    // Settles within the deadline, or names the call that still waits. The
    // deadline, 60 times the hot-path timeout, is room for any load: what it
    // catches is a call that would wait for good.
    const deadlineMs = 30_000;
    const settle = (what: string, call: Promise<unknown>) => {
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([
        call.then(
          () => `${what}: answered`,
          (err: Error) => `${what}: ${err.name}`,
        ),
        new Promise<string>((resolve) => (timer = setTimeout(() => resolve(`${what}: still waiting`), deadlineMs))),
      ]).finally(() => clearTimeout(timer));
    };
    try {
      for (let round = 0; round < 3; round++) {
        // Back to serving: a pooled connection the last outage ended may fail
        // its next call first, and a loaded machine may pass the hot-path
        // timeout, so the deadline is the settle deadline's.
        for (const deadline = Date.now() + deadlineMs; ; ) {
          const reads = await Promise.allSettled(Array.from({ length: 10 }, () => store.webhooks.findSourceByTokenDigest(source.tokenDigest!, now)));
          if (reads.every((r) => r.status === "fulfilled")) break;
          if (Date.now() > deadline) throw new Error(`the store did not serve again after the database came back: ${String(reads.find((r) => r.status === "rejected")?.reason)}`);
          await new Promise((r) => setTimeout(r, 100));
        }
        await admin.unsafe(`alter database ${name} allow_connections false`);
        await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name}`;
        const outcomes = await Promise.all([
          // Spread over a few milliseconds: some meet a closing connection, some a new one.
          ...Array.from({ length: 5 }, (_, i) =>
            settle("source", new Promise((r) => setTimeout(r, 3 * i)).then(() => store.webhooks.findSourceByTokenDigest(source.tokenDigest!, now))),
          ),
          settle("candidates", store.webhooks.matchCandidates(tenantId, source.id)),
          settle("ingest", store.webhooks.ingest(ingestItem(tenantId, source.id, "agt_x"), DAY)),
          settle("list", store.events.list(tenantId, { limit: 1 })),
        ]);
        expect(outcomes.filter((o) => o.endsWith("still waiting"))).toEqual([]);
        expect(outcomes.filter((o) => !o.endsWith("StoreUnavailableError"))).toEqual([]);
        await admin.unsafe(`alter database ${name} allow_connections true`);
      }
    } finally {
      await admin.unsafe(`alter database ${name} allow_connections true`);
      await admin.end();
      await store.close();
    }
  });
});

describe("openStore", () => {
  it("opens PostgreSQL for a postgres:// or postgresql:// URL and SQLite without one", async () => {
    const db = await createTestDatabase();
    const dir = mkdtempSync(join(tmpdir(), "agentplane-open-"));
    const sql = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      for (const scheme of ["postgres:", "postgresql:"]) {
        const store = await openStore({ databaseUrl: db.url.replace(/^postgres(ql)?:/, scheme), sqlite: { path: join(dir, "unused.db") } });
        const id = newId("ten");
        await store.tenants.insert({ id, slug: scheme.slice(0, -1), ...times }).finally(() => store.close());
        expect(await sql`select slug from tenants where id = ${id}`).toEqual([{ slug: scheme.slice(0, -1) }]);
      }
      const sqlite = await openStore({ sqlite: { path: join(dir, "agentplane.db") } });
      await sqlite.tenants.insert({ id: newId("ten"), slug: "embedded", ...times });
      expect((await sqlite.tenants.get("embedded"))?.slug).toBe("embedded");
      await sqlite.close();
      await expect(openStore({ databaseUrl: "mysql://root:topsecret@db/x", sqlite: { path: join(dir, "x.db") } })).rejects.toThrow(
        /^the database URL must start with postgres:\/\/ or postgresql:\/\/$/,
      );
    } finally {
      await sql.end();
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
