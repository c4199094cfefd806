// The overview aggregates (store.overview), held by both engines alike: a
// known load of runs and events around a window, and the counts each engine
// makes of it must be these, exactly.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { idFloor, idTime, type IdKind } from "../src/lib/ids.js";
import { createPostgresStore } from "../src/store/postgres/store.js";
import type { RunInsert } from "../src/store/rows.js";
import { createSqliteStore } from "../src/store/sqlite/store.js";
import type { Store } from "../src/store/store.js";
import { createTestDatabase } from "./support/postgres.js";

const engines = [
  {
    name: "sqlite",
    async setup() {
      const dir = mkdtempSync(join(tmpdir(), "agentplane-overview-"));
      const store = createSqliteStore({ path: join(dir, "agentplane.db") });
      return { store, teardown: async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); } };
    },
  },
  {
    name: "postgres",
    async setup() {
      const db = await createTestDatabase();
      const store = await createPostgresStore({ url: db.url, poolSize: 4 });
      return { store, teardown: async () => { await store.close(); await db.drop(); } };
    },
  },
];


const MINUTE = 60_000;
const START = Date.UTC(2026, 0, 5, 10, 0, 0);
const QUERY = { start: START, bucketMs: MINUTE, buckets: 60, top: 2 };
const END = START + 60 * MINUTE;

// An id made at `ms`, as newId would have made it then (UUIDv7 layout).
let serial = 0;
const idAt = (kind: IdKind, ms: number) =>
  `${idFloor(kind, ms).slice(0, -"0000-0000-000000000000".length)}7${randomBytes(2).toString("hex").slice(1)}-8${(serial++).toString(16).padStart(3, "0")}-${randomBytes(6).toString("hex")}`;

describe.each(engines)("overview aggregates on $name", (engine) => {
  let store: Store;
  let teardown: () => Promise<void>;
  let queuedId: string;

  beforeAll(async () => {
    ({ store, teardown } = await engine.setup());
    for (const id of ["ten_a", "ten_b"]) await store.tenants.insert({ id, slug: id.slice(4), createTime: 0, updateTime: 0 });
    const run = async (at: number, patch: Partial<RunInsert>, tenantId = "ten_a") => {
      const id = idAt("run", at);
      await store.runs.insert({ id, tenantId, agentId: "agt_1", status: "succeeded", steps: [], createTime: at, updateTime: at, ...patch });
      return id;
    };
    const ended = (at: number, ms: number) => ({ startTime: at + 10, endTime: at + 10 + ms });
    const b = (bucket: number, offset = 1000) => START + bucket * MINUTE + offset;
    await run(b(0), { triggerId: "trg_1", ...ended(b(0), 100) });
    await run(b(0, 2000), { triggerId: "trg_1", ...ended(b(0, 2000), 300) });
    await run(b(0, 3000), { status: "failed", triggerId: "trg_1", error: "steps[0] (lookup): skill_timeout: no answer", ...ended(b(0, 3000), 200) });
    await run(b(5), { status: "failed", agentId: "agt_2", triggerId: "trg_1", error: "steps[1].arguments: expression_timeout: over 1000 ms", ...ended(b(5), 400) });
    await run(b(5, 2000), { status: "timed_out", error: "agent timeout after 5s", ...ended(b(5, 2000), 5000) });
    await run(b(5, 3000), { status: "failed", agentId: "agt_3", error: 'agent "agt_9" no longer exists' });
    queuedId = await run(b(59), { status: "queued" });
    await run(b(59, 2000), { status: "running", startTime: b(59, 2010) });
    await run(b(59, 3000), { status: "cancelled", ...ended(b(59, 3000), 50) });
    // Outside the window by a millisecond, each side; another tenant inside.
    await run(START - 1, { status: "failed", error: "model_error: 500", ...ended(START - 1, 7) });
    await run(END, { status: "failed", error: "model_error: 500", ...ended(END, 7) });
    await run(b(5), { status: "failed", error: "model_error: 500", ...ended(b(5), 7) }, "ten_b");
    await run(b(5), { status: "queued" }, "ten_b");

    const event = (at: number, tenantId = "ten_a") =>
      store.events.insert({
        id: idAt("evt", at),
        tenantId,
        sourceId: "src_1",
        eventType: "order.created",
        payload: {},
        receiveTime: at,
        matchedTriggerIds: [],
        createTime: at,
        updateTime: at,
      });
    for (const at of [b(0), b(0, 2000), b(0, 59_999), b(59), START - 1, END]) await event(at);
    await event(b(1), "ten_b");
  });
  afterAll(() => teardown());

  it("counts the window's events and runs per bucket and status, exactly within its bounds and tenant", async () => {
    const counts = await store.overview.tenant("ten_a", QUERY);
    const at = (entries: [number, number][]) => {
      const buckets = new Array<number>(60).fill(0);
      for (const [i, n] of entries) buckets[i] = n;
      return buckets;
    };
    expect(counts.events).toEqual(at([[0, 3], [59, 1]]));
    expect(counts.runs).toEqual({
      succeeded: at([[0, 2]]),
      failed: at([[0, 1], [5, 2]]),
      timed_out: at([[5, 1]]),
      queued: at([[59, 1]]),
      running: at([[59, 1]]),
      cancelled: at([[59, 1]]),
    });
  });

  it("gives nearest-rank duration percentiles of the ended runs, the top failing agents and triggers, failures by leading word, and the queue", async () => {
    const counts = await store.overview.tenant("ten_a", QUERY);
    // Ended with both times: 100, 200, 300, 400, 5000 (the cancelled run and
    // the run that never started do not count).
    expect(counts.durations).toEqual({ count: 5, p50Ms: 300, p95Ms: 5000 });
    // agt_2 and agt_3 tie at one failure: the lower id first, two at most.
    expect(counts.failingAgents).toEqual([
      { id: "agt_1", failures: 2, runs: 7 },
      { id: "agt_2", failures: 1, runs: 1 },
    ]);
    expect(counts.failingTriggers).toEqual([{ id: "trg_1", failures: 2, runs: 4 }]);
    expect([...counts.failureWords].sort((x, y) => x.word.localeCompare(y.word))).toEqual([
      { status: "timed_out", word: "", count: 1 },
      { status: "failed", word: "agent", count: 1 },
      { status: "failed", word: "expression_timeout", count: 1 },
      { status: "failed", word: "skill_timeout", count: 1 },
    ]);
    expect(counts.queued).toBe(1);
    expect(counts.oldestQueuedTime).toBe(idTime(queuedId));
  });

  it("answers zeros for a tenant with nothing in the window", async () => {
    const counts = await store.overview.tenant("ten_a", { ...QUERY, start: END + 60 * MINUTE });
    expect(counts.events.every((n) => n === 0)).toBe(true);
    expect(Object.values(counts.runs).flat().every((n) => n === 0)).toBe(true);
    expect(counts).toMatchObject({ durations: { count: 0, p50Ms: 0, p95Ms: 0 }, failingAgents: [], failingTriggers: [], failureWords: [], queued: 1 });
  });

  it("keeps durations at three significant digits, so their groups stay few", async () => {
    const at = START + 30 * MINUTE;
    await store.tenants.insert({ id: "ten_c", slug: "c", createTime: 0, updateTime: 0 });
    for (const [i, ms] of [12_345, 12_399, 987_654].entries())
      await store.runs.insert({ id: idAt("run", at + i), tenantId: "ten_c", agentId: "agt_1", status: "succeeded", steps: [], startTime: at, endTime: at + ms, createTime: at + i, updateTime: at + i });
    expect((await store.overview.tenant("ten_c", QUERY)).durations).toEqual({ count: 3, p50Ms: 12_300, p95Ms: 987_000 });
  });
});
