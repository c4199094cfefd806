// Retention: events and finished runs past AGENTPLANE_RETENTION_DAYS go, in
// bounded batches, oldest first; anything a queued or running run still
// needs stays, and so do idempotency keys inside their 24 h window.
import { mkdtempSync, rmSync } from "node:fs";
import Database from "better-sqlite3";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../src/config.js";
import { createLogger } from "../src/log.js";
import { Retention } from "../src/runtime/retention.js";
import { IDEMPOTENCY_WINDOW_MS } from "../src/service/webhooks.js";
import { migratePostgres, openPostgres, type Sql } from "../src/store/postgres/open.js";
import { createPgRetention } from "../src/store/postgres/retention.js";
import * as pgSchema from "../src/store/postgres/schema.js";
import type { EventInsert, RunInsert, RunStatus } from "../src/store/rows.js";
import { BUSY_TIMEOUT_MS } from "../src/store/sqlite/connection.js";
import * as sqliteSchema from "../src/store/sqlite/schema.js";
import { createSqliteStore } from "../src/store/sqlite/store.js";
import type { RetentionStore } from "../src/store/store.js";
import { createTestDatabase } from "./support/postgres.js";

const DAY = 86_400_000;
const NOW = Date.UTC(2030, 0, 31);
const CUTOFF = NOW - 30 * DAY;

interface Harness {
  retention: RetentionStore;
  // Another connection's retention, for "one process at a time".
  other(): { retention: RetentionStore; close(): Promise<void> };
  insertEvent(row: EventInsert): Promise<void>;
  insertRun(row: RunInsert): Promise<void>;
  insertSlot(triggerId: string, slotTime: number): Promise<void>;
  insertBucket(key: string, refillTime: number): Promise<void>;
  ids(table: "events" | "runs" | "rate_limit_buckets"): Promise<string[]>;
  slots(): Promise<string[]>;
  // Whether the events' unique index still holds this (source, key).
  keyTaken(sourceId: string, key: string): Promise<boolean>;
  // Holds what keeps other processes from pruning until the returned release.
  holdPruneLock(): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

const seedRows = {
  tenant: { id: "ten_1", slug: "acme", createTime: 0, updateTime: 0 },
  agent: { id: "agt_1", tenantId: "ten_1", name: "a", spec: { steps: [] } as never, maxSteps: 1, timeoutMs: 1000, enabled: true, createTime: 0, updateTime: 0 },
  triggers: ["trg_a", "trg_b"].map((id) => ({ id, tenantId: "ten_1", agentId: "agt_1", enabled: true, kind: "schedule" as const, cron: "* * * * *", createTime: 0, updateTime: 0 })),
};

async function sqliteHarness(): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), "agentplane-retention-"));
  const path = join(dir, "agentplane.db");
  const store = createSqliteStore({ path });
  const { db } = store;
  const s = sqliteSchema;
  await db.insert(s.tenants).values(seedRows.tenant);
  await db.insert(s.agents).values(seedRows.agent);
  await db.insert(s.triggers).values(seedRows.triggers);
  const reader = new Database(path, { readonly: true });
  const all = (q: string) => reader.prepare(q).pluck().all() as string[];
  return {
    retention: store.retention,
    other() {
      const o = createSqliteStore({ path, migrate: false });
      return { retention: o.retention, close: () => o.close() };
    },
    insertEvent: async (row) => void (await db.insert(s.events).values(row)),
    insertRun: async (row) => void (await db.insert(s.runs).values(row)),
    insertSlot: async (triggerId, slotTime) => void (await db.insert(s.scheduleSlots).values({ triggerId, slotTime, runId: "" })),
    insertBucket: async (key, refillTime) => void (await db.insert(s.rateLimitBuckets).values({ key, tokens: 1, refillTime })),
    ids: async (table) => all(`select ${table === "rate_limit_buckets" ? "key" : "id"} from ${table} order by 1`),
    slots: async () => all(`select trigger_id || '@' || slot_time from schedule_slots order by trigger_id, slot_time`),
    async keyTaken(sourceId, key) {
      const t = NOW;
      const result = await store.webhooks.ingest(
        {
          event: { id: `evt_probe_${key}`, tenantId: "ten_1", sourceId, eventType: "x", payload: {}, receiveTime: t, idempotencyKey: key, matchedTriggerIds: [], createTime: t, updateTime: t },
          runs: [],
        },
        IDEMPOTENCY_WINDOW_MS,
      );
      return result.duplicate;
    },
    async holdPruneLock() {
      const other = new Database(path);
      other.prepare("begin immediate").run();
      return async () => {
        other.prepare("rollback").run();
        other.close();
      };
    },
    async close() {
      reader.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresHarness(): Promise<Harness> {
  const database = await createTestDatabase();
  const opened = openPostgres({ url: database.url, poolSize: 4 });
  await migratePostgres(opened);
  const { db, sql } = opened;
  const s = pgSchema;
  await db.insert(s.tenants).values(seedRows.tenant);
  await db.insert(s.agents).values(seedRows.agent);
  await db.insert(s.triggers).values(seedRows.triggers);
  const others: Sql[] = [];
  return {
    retention: createPgRetention(sql),
    other() {
      const o = openPostgres({ url: database.url, poolSize: 2 }).sql;
      others.push(o);
      return { retention: createPgRetention(o), close: () => o.end() };
    },
    insertEvent: async (row) => void (await db.insert(s.events).values(row)),
    insertRun: async (row) => void (await db.insert(s.runs).values(row)),
    insertSlot: async (triggerId, slotTime) => void (await db.insert(s.scheduleSlots).values({ triggerId, slotTime, runId: "" })),
    insertBucket: async (key, refillTime) => void (await db.insert(s.rateLimitBuckets).values({ key, tokens: 1, refillTime })),
    ids: async (table) =>
      (await sql.unsafe<{ id: string }[]>(`select ${table === "rate_limit_buckets" ? "key" : "id"} as id from ${table} order by 1`)).map((r) => r.id),
    slots: async () =>
      (await sql<{ s: string }[]>`select trigger_id || '@' || slot_time as s from schedule_slots order by trigger_id, slot_time`).map((r) => r.s),
    // PostgreSQL ingest decides duplicates by this index (ON CONFLICT).
    async keyTaken(sourceId, key) {
      const inserted = await sql`
        insert into events (id, tenant_id, source_id, event_type, payload, receive_time, idempotency_key, matched_trigger_ids, create_time, update_time)
        values (${`evt_probe_${key}`}, 'ten_1', ${sourceId}, 'x', '{}', ${NOW}, ${key}, '[]', ${NOW}, ${NOW})
        on conflict (source_id, idempotency_key) where idempotency_key is not null do nothing returning id`;
      return inserted.length === 0;
    },
    async holdPruneLock() {
      const holder = openPostgres({ url: database.url, poolSize: 1 }).sql;
      const reserved = await holder.reserve();
      await reserved`select pg_advisory_lock(${PRUNE_LOCK_FOR_TEST})`;
      return async () => {
        reserved.release();
        await holder.end();
      };
    },
    async close() {
      await Promise.all(others.map((o) => o.end()));
      await sql.end();
      await database.drop();
    },
  };
}

// The key src/store/postgres/retention.ts locks per batch; a test that holds
// it stands for another replica pruning.
const PRUNE_LOCK_FOR_TEST = 7_104_519_233_002;

const event = (id: string, receiveTime: number, idempotencyKey: string | null = null): EventInsert => ({
  id,
  tenantId: "ten_1",
  sourceId: "whs_1",
  eventType: "order.created",
  payload: { n: id },
  receiveTime,
  idempotencyKey,
  matchedTriggerIds: [],
  createTime: receiveTime,
  updateTime: receiveTime,
});

const ENDED: RunStatus[] = ["succeeded", "failed", "cancelled", "timed_out"];
const run = (id: string, eventId: string | null, status: RunStatus, endTime: number | null, createTime = (endTime ?? NOW) - 1000): RunInsert => ({
  id,
  tenantId: "ten_1",
  agentId: "agt_1",
  eventId,
  status,
  steps: [],
  endTime,
  createTime,
  updateTime: endTime ?? createTime,
});

describe.each([
  ["SQLite", sqliteHarness],
  ["PostgreSQL", postgresHarness],
])("retention on %s", (_name, open) => {
  let h: Harness;
  beforeEach(async () => {
    h = await open();
  });
  afterEach(async () => {
    await h.close();
  });

  it("deletes old finished runs and their events, keeps recent ones and what unfinished runs need", async () => {
    // Old and finished, every ended status: gone with their events.
    for (const [i, status] of ENDED.entries()) {
      await h.insertEvent(event(`evt_old_${i}`, CUTOFF - 10 * DAY + i));
      await h.insertRun(run(`run_old_${i}`, `evt_old_${i}`, status, CUTOFF - 9 * DAY + i));
    }
    // An old event with no runs (matched nothing): gone.
    await h.insertEvent(event("evt_old_unmatched", CUTOFF - DAY));
    // A manual run (no event) that ended long ago: gone.
    await h.insertRun(run("run_old_manual", null, "succeeded", CUTOFF - DAY));
    // Old event, its run still queued or running: both stay.
    await h.insertEvent(event("evt_old_queued", CUTOFF - 20 * DAY));
    await h.insertRun(run("run_queued", "evt_old_queued", "queued", null, CUTOFF - 20 * DAY));
    await h.insertEvent(event("evt_old_running", CUTOFF - 20 * DAY));
    await h.insertRun(run("run_running", "evt_old_running", "running", null, CUTOFF - 20 * DAY));
    // Old event with one run ended and one queued: the ended run goes, the event stays.
    await h.insertEvent(event("evt_old_mixed", CUTOFF - 5 * DAY));
    await h.insertRun(run("run_mixed_done", "evt_old_mixed", "succeeded", CUTOFF - 5 * DAY));
    await h.insertRun(run("run_mixed_queued", "evt_old_mixed", "queued", null, CUTOFF - 5 * DAY));
    // An old event whose run ended after the cutoff: both stay.
    await h.insertEvent(event("evt_old_late_run", CUTOFF - DAY));
    await h.insertRun(run("run_late", "evt_old_late_run", "failed", CUTOFF + DAY));
    // Recent: stays.
    await h.insertEvent(event("evt_new", NOW - DAY));
    await h.insertRun(run("run_new", "evt_new", "succeeded", NOW - DAY));

    expect(await h.retention.prune(CUTOFF, 100)).toEqual({ events: 5, runs: 6, slots: 0, buckets: 0, rollups: 0 });
    expect(await h.ids("events")).toEqual(["evt_new", "evt_old_late_run", "evt_old_mixed", "evt_old_queued", "evt_old_running"]);
    expect(await h.ids("runs")).toEqual(["run_late", "run_mixed_queued", "run_new", "run_queued", "run_running"]);
    expect(await h.retention.prune(CUTOFF, 100)).toEqual({ events: 0, runs: 0, slots: 0, buckets: 0, rollups: 0 });
  });

  it("deletes at most a batch of each, oldest first", async () => {
    for (let i = 0; i < 7; i++) {
      await h.insertEvent(event(`evt_${i}`, CUTOFF - 10 * DAY + i * 1000));
      // Ids in the reverse order of time: the order is by time, not id.
      await h.insertRun(run(`run_${9 - i}`, `evt_${i}`, "succeeded", CUTOFF - 5 * DAY + i * 1000));
    }
    expect(await h.retention.prune(CUTOFF, 3)).toEqual({ events: 3, runs: 3, slots: 0, buckets: 0, rollups: 0 });
    expect(await h.ids("runs")).toEqual(["run_3", "run_4", "run_5", "run_6"]);
    expect(await h.ids("events")).toEqual(["evt_3", "evt_4", "evt_5", "evt_6"]);
    expect(await h.retention.prune(CUTOFF, 3)).toEqual({ events: 3, runs: 3, slots: 0, buckets: 0, rollups: 0 });
    expect(await h.retention.prune(CUTOFF, 3)).toEqual({ events: 1, runs: 1, slots: 0, buckets: 0, rollups: 0 });
    expect(await h.ids("events")).toEqual([]);
  });

  it("deletes old schedule slots but each trigger's latest, and idle rate-limit buckets", async () => {
    for (const t of [CUTOFF - 40 * DAY, CUTOFF - 35 * DAY, CUTOFF - DAY]) await h.insertSlot("trg_a", t);
    for (const t of [CUTOFF - 40 * DAY, NOW - 60_000]) await h.insertSlot("trg_b", t);
    await h.insertBucket("whs_gone", CUTOFF - DAY);
    await h.insertBucket("whs_busy", NOW - 1000);
    expect(await h.retention.prune(CUTOFF, 100)).toEqual({ events: 0, runs: 0, slots: 3, buckets: 1, rollups: 0 });
    // trg_a's latest slot, although old, stays: it is what stops the
    // scheduler from firing that slot again.
    expect(await h.slots()).toEqual([`trg_a@${CUTOFF - DAY}`, `trg_b@${NOW - 60_000}`]);
    expect(await h.ids("rate_limit_buckets")).toEqual(["whs_busy"]);
  });

  it("keeps idempotency keys for their 24 h window with a retention of one day", async () => {
    const now = NOW;
    await h.insertEvent(event("evt_keyed", now - 23 * 3600_000, "k-recent"));
    await h.insertEvent(event("evt_keyed_old", now - 25 * 3600_000, "k-old"));
    const loop = new Retention({ store: h.retention, log: createLogger("silent"), days: 1, batch: 10, now: () => now });
    expect(await loop.runOnce()).toMatchObject({ events: 1 });
    expect(await h.ids("events")).toEqual(["evt_keyed"]);
    expect(await h.keyTaken("whs_1", "k-recent")).toBe(true);
  });

  it("lets one process prune at a time", async () => {
    await h.insertEvent(event("evt_old", CUTOFF - DAY));
    const release = await h.holdPruneLock();
    const other = h.other();
    try {
      // PostgreSQL: another replica holds the prune lock; SQLite: another
      // process holds the write lock. Either way this one skips, soon: a
      // prune that waited for the lock would wait for good on PostgreSQL (the
      // release comes after) and the store's whole busy timeout on SQLite,
      // where the prune's own wait is a twentieth of it.
      const start = Date.now();
      expect(await other.retention.prune(CUTOFF, 10)).toBeUndefined();
      expect(Date.now() - start).toBeLessThan(BUSY_TIMEOUT_MS);
    } finally {
      await release();
      await other.close();
    }
    expect(await h.retention.prune(CUTOFF, 10)).toMatchObject({ events: 1 });
  });

  it("runs batch after batch until nothing old is left, then again every interval", async () => {
    for (let i = 0; i < 10; i++) {
      await h.insertEvent(event(`evt_${i}`, CUTOFF - 10 * DAY + i));
      await h.insertRun(run(`run_${i}`, `evt_${i}`, "succeeded", CUTOFF - 5 * DAY + i));
    }
    const loop = new Retention({ store: h.retention, log: createLogger("silent"), days: 30, batch: 3, intervalMs: 50, now: () => NOW });
    expect(await loop.runOnce()).toEqual({ events: 10, runs: 10, slots: 0, buckets: 0, rollups: 0, batches: 4 });
    expect(await h.ids("runs")).toEqual([]);

    loop.start();
    try {
      await h.insertEvent(event("evt_later", CUTOFF - DAY));
      const deadline = Date.now() + 5000;
      while ((await h.ids("events")).length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await h.ids("events")).toEqual([]);
    } finally {
      await loop.stop();
    }
  });
});

describe("retention configuration", () => {
  const base = { AGENTPLANE_AUTH_MODE: "jwt", AGENTPLANE_JWT_ISSUER: "https://issuer", AGENTPLANE_JWT_AUDIENCE: "a", AGENTPLANE_SECRET_KEY: Buffer.alloc(32).toString("base64") };

  it("defaults to 30 days in batches of 500", () => {
    expect(loadConfig(base)).toMatchObject({ retentionDays: 30, retentionBatch: 500 });
  });

  it("refuses fewer than one day, which would cut into the idempotency window", () => {
    expect(() => loadConfig({ ...base, AGENTPLANE_RETENTION_DAYS: "0" })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, AGENTPLANE_RETENTION_DAYS: "0" })).toThrow(/AGENTPLANE_RETENTION_DAYS must be at least 1/);
    expect(() => loadConfig({ ...base, AGENTPLANE_RETENTION_BATCH: "0" })).toThrow(/AGENTPLANE_RETENTION_BATCH must be at least 1/);
    expect(loadConfig({ ...base, AGENTPLANE_RETENTION_DAYS: "7", AGENTPLANE_RETENTION_BATCH: "50" })).toMatchObject({ retentionDays: 7, retentionBatch: 50 });
  });
});
