// The overview's sealed rollups (store/overview.ts), held by both engines
// alike: a week of runs and events sealed on an injected clock, and every
// window's answer then the answer of the live query over the same rows; a
// slot with a run not ended stays live until it ends; two sealers at once
// seal each slot once; retention takes the rollups with the runs.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { OverviewWindow } from "../gen/platform/v1/overview_pb.js";
import { idFloor, type IdKind } from "../src/lib/ids.js";
import { createLogger } from "../src/log.js";
import { OverviewSealer } from "../src/runtime/overview-sealer.js";
import { overviewQuery } from "../src/service/overview.js";
import { MAX_SEAL_SLOTS, SLOT_MS, sealLimit, type OverviewCounts, type OverviewQuery } from "../src/store/overview.js";
import { openPostgres } from "../src/store/postgres/open.js";
import { createPostgresStore } from "../src/store/postgres/store.js";
import type { RunInsert } from "../src/store/rows.js";
import { createSqliteStore } from "../src/store/sqlite/store.js";
import type { Store } from "../src/store/store.js";
import { createTestDatabase } from "./support/postgres.js";

interface Harness {
  store: Store;
  // A second process's store on the same database.
  other(): Promise<Store>;
  // One statement on the database, outside the stores.
  exec(statement: string): Promise<void>;
  close(): Promise<void>;
}

const engines = [
  {
    name: "sqlite",
    async setup(): Promise<Harness> {
      const dir = mkdtempSync(join(tmpdir(), "agentplane-rollups-"));
      const path = join(dir, "agentplane.db");
      const store = createSqliteStore({ path });
      const raw = new Database(path);
      const others: Store[] = [];
      return {
        store,
        other: async () => {
          const o = createSqliteStore({ path, migrate: false });
          others.push(o);
          return o;
        },
        exec: async (statement) => void raw.exec(statement),
        async close() {
          raw.close();
          for (const o of others) await o.close();
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: "postgres",
    async setup(): Promise<Harness> {
      const db = await createTestDatabase();
      const store = await createPostgresStore({ url: db.url, poolSize: 4 });
      const { sql } = openPostgres({ url: db.url, poolSize: 1 });
      const others: Store[] = [];
      return {
        store,
        other: async () => {
          const o = await createPostgresStore({ url: db.url, poolSize: 4, migrate: false });
          others.push(o);
          return o;
        },
        exec: async (statement) => void (await sql.unsafe(statement)),
        async close() {
          await sql.end();
          for (const o of others) await o.close();
          await store.close();
          await db.drop();
        },
      };
    },
  },
];

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
// The injected clock: never on a slot's edge.
const NOW = Date.UTC(2026, 0, 12, 10, 7, 30);

// An id made at `ms`, as newId would have made it then (UUIDv7 layout).
let serial = 0;
const idAt = (kind: IdKind, ms: number) =>
  `${idFloor(kind, ms).slice(0, -"0000-0000-000000000000".length)}7${randomBytes(2).toString("hex").slice(1)}-8${(serial++).toString(16).padStart(3, "0")}-${randomBytes(6).toString("hex")}`;

const ERRORS = ["steps[0] (lookup): skill_timeout: no answer", "model_error: 500", "steps[1].arguments: expression_timeout: over 1000 ms", 'agent "agt_9" no longer exists'];

// A week and a bit of a tenant's activity up to NOW, every kind of figure: a
// run every 37 minutes (its status, agent, trigger, error and duration
// varying with it), an event every 23; the runs of the last 10 minutes still
// queued or running, as they would be.
async function seedWeek(store: Store, tenantId: string, from = NOW - 8 * DAY) {
  await store.tenants.insert({ id: tenantId, slug: tenantId.slice(4), createTime: 0, updateTime: 0 });
  let i = 0;
  for (let at = from; at < NOW; at += 37 * MINUTE + 1234, i++) {
    const recent = at > NOW - 10 * MINUTE;
    const status = recent ? (i % 2 ? "queued" : "running") : (["succeeded", "succeeded", "succeeded", "failed", "timed_out", "cancelled"] as const)[i % 6]!;
    const ms = [120, 12_345, 987_654, 3, 40_000][i % 5]!;
    await store.runs.insert({
      id: idAt("run", at),
      tenantId,
      agentId: `agt_${i % 3}`,
      ...(i % 4 ? { triggerId: `trg_${i % 2}` } : {}),
      status,
      steps: [],
      error: status === "failed" ? ERRORS[i % ERRORS.length]! : status === "timed_out" ? "agent timeout" : "",
      // Every 7th never started (cancelled while queued, say): no duration.
      ...(status === "queued" || i % 7 === 0 ? {} : { startTime: at + 10 }),
      ...(recent ? {} : { endTime: at + 10 + ms }),
      createTime: at,
      updateTime: at,
    });
  }
  for (let at = from + 5000; at < NOW; at += 23 * MINUTE + 777)
    await store.events.insert({ id: idAt("evt", at), tenantId, sourceId: "src_1", eventType: "order.created", payload: {}, receiveTime: at, matchedTriggerIds: [], createTime: at, updateTime: at });
}

const windows = (now: number): OverviewQuery[] => [
  ...[OverviewWindow.HOUR, OverviewWindow.DAY, OverviewWindow.WEEK].map((w) => overviewQuery(w, now)),
  // A day that ended earlier, and one cut in hours: any start and width in whole slots.
  { start: now - now % SLOT_MS - 2 * DAY, bucketMs: SLOT_MS, buckets: 96, top: 3 },
  { start: now - now % HOUR - DAY, bucketMs: HOUR, buckets: 24, top: 10 },
];

describe.each(engines)("overview rollups on $name", (engine) => {
  let h: Harness;
  beforeEach(async () => {
    h = await engine.setup();
  });
  afterEach(() => h.close());

  // The answers of the live query: the tenants' sealed ranges emptied for the
  // read (no watermark, or an empty one, reads every slot live), then put back.
  async function live(tenantId: string, queries: OverviewQuery[]) {
    await h.exec(`create table saved_watermarks as select * from overview_watermarks`);
    await h.exec(`update overview_watermarks set sealed_until = sealed_from`);
    try {
      return await Promise.all(queries.map((q) => h.store.overview.tenant(tenantId, q)));
    } finally {
      await h.exec(`update overview_watermarks set sealed_until = (select s.sealed_until from saved_watermarks s where s.tenant_id = overview_watermarks.tenant_id)`);
      await h.exec(`drop table saved_watermarks`);
    }
  }
  const read = (tenantId: string, queries: OverviewQuery[]) => Promise.all(queries.map((q) => h.store.overview.tenant(tenantId, q)));

  it("seals a day per pass up to the slot before the one holding now, and then answers every window as the live query does", async () => {
    await seedWeek(h.store, "ten_a");
    await seedWeek(h.store, "ten_b", NOW - 2 * DAY);
    const before = await read("ten_a", windows(NOW));
    expect(await h.store.overview.unsealed(NOW)).toEqual(expect.arrayContaining(["ten_a", "ten_b"]));

    // A tenant never sealed starts 7 days back: 672 slots up to sealLimit.
    const passes: number[] = [];
    for (let sealed; (sealed = await h.store.overview.seal("ten_a", NOW)); ) passes.push(sealed);
    const total = (sealLimit(NOW) - (Math.floor((NOW - 7 * DAY) / SLOT_MS) * SLOT_MS)) / SLOT_MS;
    expect(passes).toEqual([...new Array<number>(Math.floor(total / MAX_SEAL_SLOTS)).fill(MAX_SEAL_SLOTS), total % MAX_SEAL_SLOTS].filter(Boolean));
    expect(await h.store.overview.unsealed(NOW)).toEqual(["ten_b"]);
    // The slot holding now and the one before stay live, until the next slot begins.
    expect(await h.store.overview.seal("ten_a", Math.ceil(NOW / SLOT_MS) * SLOT_MS - 1)).toBe(0);

    const after = await read("ten_a", windows(NOW));
    expect(after).toEqual(before);
    expect(after).toEqual(await live("ten_a", windows(NOW)));
    // The other tenant's figures are its own, sealed or not.
    expect(await read("ten_b", windows(NOW))).toEqual(await live("ten_b", windows(NOW)));
  });

  it("seals in the background, a round every interval, and stops cleanly", async () => {
    await seedWeek(h.store, "ten_a", NOW - DAY);
    const sealer = new OverviewSealer({ store: h.store.overview, log: createLogger("silent"), intervalMs: 20, now: () => NOW });
    sealer.start();
    try {
      const deadline = Date.now() + 10_000;
      while ((await h.store.overview.unsealed(NOW)).length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await h.store.overview.unsealed(NOW)).toEqual([]);
    } finally {
      await sealer.stop();
    }
    expect(await sealer.runOnce()).toEqual({ passes: 0, slots: 0 });
  });

  it("keeps a slot live while a run created in it is queued or running, and seals the figures it ended with", async () => {
    await seedWeek(h.store, "ten_a", NOW - DAY);
    const queuedAt = NOW - 5 * HOUR + 3 * MINUTE;
    const runningAt = NOW - 3 * HOUR + 7 * MINUTE;
    const run = (id: string, at: number, patch: Partial<RunInsert>) =>
      h.store.runs.insert({ id, tenantId: "ten_a", agentId: "agt_0", status: "queued", steps: [], createTime: at, updateTime: at, ...patch });
    const queued = idAt("run", queuedAt);
    const running = idAt("run", runningAt);
    await run(queued, queuedAt, {});
    await run(running, runningAt, { status: "running", startTime: runningAt + 10 });
    const sealedUntil = async (now: number) => {
      while (await h.store.overview.seal("ten_a", now));
      return (await h.store.overview.unsealed(now)).includes("ten_a") ? "behind" : "caught up";
    };

    expect(await sealedUntil(NOW)).toBe("behind");
    // Sealed up to the queued run's slot: a run of the slot before it ends
    // within the day window as ever, and the queued run is counted queued.
    const day = overviewQuery(OverviewWindow.DAY, NOW);
    expect((await read("ten_a", [day]))[0]!.runs.queued.reduce((a, b) => a + b)).toBe((await live("ten_a", [day]))[0]!.runs.queued.reduce((a, b) => a + b));

    await h.store.queue.cancel("ten_a", queued, NOW);
    expect(await sealedUntil(NOW)).toBe("behind");
    await h.store.queue.cancel("ten_a", running, NOW);
    expect(await sealedUntil(NOW)).toBe("caught up");

    // Both slots sealed after their runs ended: counted cancelled, not queued nor running.
    const [counts] = await read("ten_a", [day]);
    const bucketOf = (at: number) => Math.floor((at - day.start) / day.bucketMs);
    expect(counts!.runs.cancelled[bucketOf(queuedAt)]).toBeGreaterThanOrEqual(1);
    expect(counts!.runs.queued[bucketOf(queuedAt)]).toBe(0);
    expect(counts!.runs.running[bucketOf(runningAt)]).toBe(0);
    expect([counts]).toEqual(await live("ten_a", [day]));
  });

  it("seals each slot once when two processes seal the same tenant at the same time", async () => {
    await seedWeek(h.store, "ten_a");
    const other = await h.other();
    const sealed: number[] = [];
    for (;;) {
      const both = await Promise.all([h.store.overview.seal("ten_a", NOW), other.overview.seal("ten_a", NOW)]);
      sealed.push(...both);
      if (both.every((n) => n === 0)) break;
    }
    expect(sealed.reduce((a, b) => a + b)).toBe((sealLimit(NOW) - Math.floor((NOW - 7 * DAY) / SLOT_MS) * SLOT_MS) / SLOT_MS);
    expect(await read("ten_a", windows(NOW))).toEqual(await live("ten_a", windows(NOW)));
  });

  it("loses its rollups to retention with the runs: a slot the cutoff cuts keeps its figures until the next round", async () => {
    await seedWeek(h.store, "ten_a");
    // The cutoff 3 days back, inside a slot, where a run ended before it.
    const cut = NOW - 3 * DAY;
    const cutSlot = Math.floor(cut / SLOT_MS) * SLOT_MS;
    await h.store.runs.insert({ id: idAt("run", cutSlot + 1), tenantId: "ten_a", agentId: "agt_0", status: "succeeded", steps: [], startTime: cutSlot + 2, endTime: cutSlot + 3, createTime: cutSlot + 1, updateTime: cutSlot + 3 });
    const sealer = new OverviewSealer({ store: h.store.overview, log: createLogger("silent"), now: () => NOW });
    expect((await sealer.runOnce()).slots).toBeGreaterThan(MAX_SEAL_SLOTS);
    const week = overviewQuery(OverviewWindow.WEEK, NOW);
    const runs = (c: OverviewCounts) => Object.values(c.runs).flat().reduce((a, b) => a + b, 0);

    const pruned = (await h.store.retention.prune(cut, 100_000))!;
    expect(pruned.runs).toBeGreaterThan(0);
    expect(pruned.rollups).toBeGreaterThan(0);
    // Before the cut slot, the window counts what retention left (live); the
    // cut slot's rollups still count that run and those before it.
    const [rolled] = await read("ten_a", [week]);
    const [liveNow] = await live("ten_a", [week]);
    const cutBucket = Math.floor((cutSlot - week.start) / week.bucketMs);
    expect(rolled!.runs.succeeded[cutBucket]).toBe(liveNow!.runs.succeeded[cutBucket]! + 1);
    expect(runs(rolled!)).toBe(runs(liveNow!) + 1);

    // The next round, its cutoff past that slot: the window is the live one again.
    expect((await h.store.retention.prune(cutSlot + SLOT_MS, 100_000))!.rollups).toBeGreaterThan(0);
    expect(await read("ten_a", windows(NOW))).toEqual(await live("ten_a", windows(NOW)));
    // Retention left the sealed range sane: nothing to seal until the clock moves on.
    expect(await h.store.overview.unsealed(NOW)).toEqual([]);
    expect(await h.store.overview.seal("ten_a", NOW)).toBe(0);
  });
});
