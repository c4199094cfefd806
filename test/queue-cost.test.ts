// What the queue's operations cost does not grow with the backlog, on either
// engine, whatever the planner knows: on a fresh table that was never
// analyzed (autovacuum off, so no statistics arrive meanwhile), claims are
// made past the point where a driver's prepared statements switch to cached
// generic plans (the 6th execution on PostgreSQL) with 1,000 runs queued,
// and again with 50,000 queued on the same connection. So are the operations
// that check a tenant's queued-run quota, which count its queued runs:
// queueing a run (RunAgent), ingesting an event (PostgreSQL; SQLite's ingest
// counts with the same statement as the count here, on its writer thread),
// and the count itself; and so is a retention batch, which deletes ended
// runs oldest first. So are the API's reads, the overview's seal, retention
// and an idempotency key's release when first done on empty tables, where a
// plan kept from then would scan. What an operation costs is counted, not timed:
// PostgreSQL's buffer accesses to the tables and indexes (pg_statio, each
// backend's counters flushed on demand), SQLite's page reads from the file
// with its page cache at its minimum (so that every page a statement touches
// is read again).
import { readFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import type Database from "better-sqlite3";
import { migratePostgres, openPostgres, openQueuePool } from "../src/store/postgres/open.js";
import { createPgWebhookStore } from "../src/store/postgres/ingest.js";
import { createPgRunQueue } from "../src/store/postgres/queue.js";
import { createPgRetention } from "../src/store/postgres/retention.js";
import { createPgScheduleStore } from "../src/store/postgres/schedules.js";
import { createPgOverview } from "../src/store/postgres/overview.js";
import { SLOT_MS, type OverviewStore } from "../src/store/overview.js";
import { createRunRepo } from "../src/store/postgres/repos.js";
import { createPgMemberships } from "../src/store/postgres/members.js";
import { queuedCount, runIdsForEvents } from "../src/store/postgres/runs.js";
import { createSqliteStore } from "../src/store/sqlite/store.js";
import { newId } from "../src/lib/ids.js";
import { queuedRun } from "../src/store/queued-run.js";
import type { RunInsert } from "../src/store/rows.js";
import type { IngestItem, MemberStore, RetentionStore, RunQueue, RunStore, ScheduleStore, WebhookStore } from "../src/store/store.js";
import { createTestDatabase } from "./support/postgres.js";

const TENANTS = 10;
const CLAIM = 8;
// Claims per backlog; the first WARM_UP of each are not counted.
const CLAIMS = 12;
const WARM_UP = 6;

interface Engine {
  queue: RunQueue;
  queuedCount(tenantId: string): Promise<number>;
  // PostgreSQL's; SQLite's commits on its writer thread (see above).
  webhooks?: WebhookStore;
  retention: RetentionStore;
  overview: OverviewStore;
  // The runs of TENANT, as the API reads them.
  runs: Pick<RunStore, "get" | "list" | "idsForEvents">;
  // Queues `perTenant` more runs for each of the first `tenants` tenants;
  // with `ended`, adds runs that succeeded at time 1 instead.
  seed(perTenant: number, tenants?: number, ended?: boolean): Promise<void>;
  // Adds `n` events of TENANT received at time 1, without runs.
  seedEvents(n: number): Promise<void>;
  // Adds `n` tenants with OPERATOR an admin of each.
  seedMemberships(n: number): Promise<void>;
  memberships: MemberStore["memberships"];
  // Adds `n` tenants, each with an agent, an envelope source whose token's
  // digest is "digest-" and its number, and a webhook trigger on it.
  seedSenders(n: number): Promise<void>;
  // What a webhook's ingest reads before its commit (both engines).
  lookups: Pick<WebhookStore, "findSourceByTokenDigest" | "matchCandidates">;
  // A schedule trigger in each of the TENANTS tenants, each with SLOTS slots.
  seedSchedules(): Promise<void>;
  schedules: ScheduleStore;
  // Ends the running runs (the claims' own), so each backlog starts with none.
  endRunning(): Promise<void>;
  // Pages (buffers) read by the claims so far, as a running count.
  cost(): Promise<number>;
  close(): Promise<void>;
}

// The seeding statements in either dialect: a series of integers named
// `name`, and an integer zero-padded into an id.
interface Dialect {
  series(n: number, name: string): string;
  pad(expr: string, width: number): string;
  true: string;
}
const PG: Dialect = { series: (n, name) => `generate_series(1, ${n}) ${name}`, pad: (e, w) => `lpad((${e})::text, ${w}, '0')`, true: "true" };
const SQLITE: Dialect = {
  series: (n, name) => `(with recursive s(v) as (select 1 union all select v + 1 from s where v < ${n}) select v as ${name} from s)`,
  pad: (e, w) => `printf('%0${w}d', ${e})`,
  true: "1",
};
const seedRuns = (d: Dialect, first: number, perTenant: number, tenants: number, now: number, ended = false) => `
  insert into runs (id, tenant_id, agent_id, status, attempt, steps, error, end_time, create_time, update_time)
  select 'run-' || ${d.pad("t", 3)} || '-' || ${d.pad(`${first} + i`, 8)}, 'ten-' || t, 'agt-' || t,
    ${ended ? "'succeeded', 1, '[]', '', 1" : "'queued', 0, '[]', '', null"}, ${now}, ${now}
  from ${d.series(tenants, "t")}, ${d.series(perTenant, "i")}`;
// Events received at time 1 (due for retention), none with a run.
const seedEvents = (d: Dialect, first: number, n: number) => `
  insert into events (id, tenant_id, source_id, event_type, payload, receive_time, idempotency_key, matched_trigger_ids, create_time, update_time)
  select 'evt-001-' || ${d.pad(`${first} + i`, 8)}, 'ten-1', 'src-1', 'seeded', '{}', 1, 'key-' || (${first} + i), '[]', 1, 1
  from ${d.series(n, "i")}`;
// Tenants "tz-…", after the seeded "ten-…" ones, OPERATOR a member of each.
const seedMemberships = (d: Dialect, first: number, n: number) => [
  `insert into tenants (id, slug, create_time, update_time) select 'tz-' || ${d.pad(`${first} + i`, 8)}, 'tz-' || ${d.pad(`${first} + i`, 8)}, 1, 1 from ${d.series(n, "i")}`,
  `insert into members (id, tenant_id, subject, role, create_time, update_time)
   select 'mem-' || ${d.pad(`${first} + i`, 8)}, 'tz-' || ${d.pad(`${first} + i`, 8)}, '${OPERATOR}', 'admin', 1, 1 from ${d.series(n, "i")}`,
];
const OPERATOR = "operator";
// Tenants "ts-…", each sending: an agent, a source and a webhook trigger.
const seedSenders = (d: Dialect, first: number, n: number) => {
  const id = d.pad(`${first} + i`, 8);
  return [
    `insert into tenants (id, slug, create_time, update_time) select 'ts-' || ${id}, 'ts-' || ${id}, 1, 1 from ${d.series(n, "i")}`,
    `insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, enabled, create_time, update_time)
     select 'agt-ts-' || ${id}, 'ts-' || ${id}, 'a', '{"skillIds":[],"allowedTools":{},"steps":[]}', 16, 120000, ${d.true}, 1, 1 from ${d.series(n, "i")}`,
    `insert into webhook_sources (id, tenant_id, name, enabled, kind, token_digest, create_time, update_time)
     select 'src-ts-' || ${id}, 'ts-' || ${id}, 'in', ${d.true}, 'envelope', 'digest-' || ${id}, 1, 1 from ${d.series(n, "i")}`,
    `insert into triggers (id, tenant_id, agent_id, enabled, kind, source_id, event_type_pattern, create_time, update_time)
     select 'trg-ts-' || ${id}, 'ts-' || ${id}, 'agt-ts-' || ${id}, ${d.true}, 'webhook', 'src-ts-' || ${id}, 'order.*', 1, 1 from ${d.series(n, "i")}`,
  ];
};
// Every five minutes, each with its first SLOTS slots fired.
const SLOTS = 3;
const SLOT_EVERY = 300_000;
const seedSchedules = (d: Dialect) => [
  `insert into triggers (id, tenant_id, agent_id, enabled, kind, cron, create_time, update_time)
   select 'trg-cron-' || t, 'ten-' || t, 'agt-' || t, ${d.true}, 'schedule', '*/5 * * * *', 1, 1 from ${d.series(TENANTS, "t")}`,
  `insert into schedule_slots (trigger_id, slot_time, run_id)
   select 'trg-cron-' || t, s * ${SLOT_EVERY}, 'run-cron-' || t || '-' || s from ${d.series(TENANTS, "t")}, ${d.series(SLOTS, "s")}`,
];
const seedTenants = (d: Dialect, now: number) => `
  insert into tenants (id, slug, create_time, update_time) select 'ten-' || t, 'ten-' || t, ${now}, ${now} from ${d.series(TENANTS, "t")}`;
const seedSources = (d: Dialect, now: number) => `
  insert into webhook_sources (id, tenant_id, name, enabled, kind, create_time, update_time)
  select 'src-' || t, 'ten-' || t, 'src-' || t, ${d.true}, 'envelope', ${now}, ${now} from ${d.series(TENANTS, "t")}`;
const seedAgents = (d: Dialect, now: number) => `
  insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, enabled, create_time, update_time)
  select 'agt-' || t, 'ten-' || t, 'agt-' || t, '{"skillIds":[],"allowedTools":{},"steps":[]}', 16, 120000, ${d.true}, ${now}, ${now}
  from ${d.series(TENANTS, "t")}`;
const END_RUNNING = "update runs set status = 'succeeded', lease_owner = null, lease_expire_time = null where status = 'running'";

async function postgresEngine(): Promise<Engine> {
  const database = await createTestDatabase();
  const migrating = openPostgres({ url: database.url, poolSize: 2 });
  await migratePostgres(migrating);
  await migrating.sql.end();
  // The queue's pool as the store opens it, of one connection: its counters
  // are the claims' alone.
  const opened = openQueuePool(database.url, 1);
  // Setup and reading on a connection of its own, whose counters are flushed
  // after each of its statements, before any claim is counted.
  // Its foreign-key checks planned for the rows there are: a generic plan
  // made while a table held a few rows scans it for every row seeded later.
  const setup = postgres(database.url, { max: 1, onnotice: () => {}, connection: { plan_cache_mode: "force_custom_plan" } });
  const flushed = async (statement: string) => {
    await setup.unsafe(statement);
    await setup`select pg_stat_force_next_flush()`;
  };
  // The store's main pool, of one connection: quota counts and ingestion.
  const main = openPostgres({ url: database.url, poolSize: 1 });
  const now = Date.now();
  await flushed("alter table runs set (autovacuum_enabled = off)");
  await flushed(seedTenants(PG, now));
  await flushed(seedAgents(PG, now));
  await flushed(seedSources(PG, now));
  const runRepo = createRunRepo(main.sql, main.db, 5000).repo;
  let seeded = 0;
  let seededEvents = 0;
  let seededTenants = 0;
  let seededSenders = 0;
  const webhooks = createPgWebhookStore(main.sql, { windowMs: 0, maxBatch: 256 }, 5000);
  return {
    queue: createPgRunQueue(opened.sql),
    queuedCount: (tenantId) => queuedCount(main.sql, tenantId),
    webhooks,
    lookups: webhooks,
    retention: createPgRetention(main.sql),
    overview: createPgOverview(main.sql, 5000),
    runs: { get: runRepo.get, list: runRepo.list, idsForEvents: (tenantId, eventIds) => runIdsForEvents(main.sql, tenantId, eventIds) },
    async seed(perTenant, tenants = TENANTS, ended = false) {
      await flushed(seedRuns(PG, seeded, perTenant, tenants, Date.now(), ended));
      seeded += perTenant;
    },
    async seedEvents(n) {
      await flushed(seedEvents(PG, seededEvents, n));
      seededEvents += n;
    },
    async seedMemberships(n) {
      for (const statement of seedMemberships(PG, seededTenants, n)) await flushed(statement);
      seededTenants += n;
    },
    memberships: createPgMemberships(main.sql, 5000),
    async seedSenders(n) {
      for (const statement of seedSenders(PG, seededSenders, n)) await flushed(statement);
      seededSenders += n;
    },
    async seedSchedules() {
      for (const statement of seedSchedules(PG)) await flushed(statement);
    },
    schedules: createPgScheduleStore(main.sql),
    endRunning: () => flushed(END_RUNNING),
    async cost() {
      // Each connection publishes its counters when it next goes idle.
      await opened.sql`select pg_stat_force_next_flush()`;
      await main.sql`select pg_stat_force_next_flush()`;
      const [row] = await setup<{ n: number }[]>`
        select sum(heap_blks_hit + heap_blks_read + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0))::int as n
        from pg_statio_user_tables`;
      return row!.n;
    },
    async close() {
      await opened.sql.end({ timeout: 5 });
      await main.sql.end({ timeout: 5 });
      await setup.end({ timeout: 5 });
      await database.drop();
    },
  };
}

// Bytes this process read through read(2)/pread(2): SQLite reads each page
// that is not in its page cache from the file so.
const bytesRead = () => Number(/^rchar: (\d+)$/m.exec(readFileSync("/proc/self/io", "utf8"))![1]);

async function sqliteEngine(): Promise<Engine> {
  const dir = mkdtempSync(join(tmpdir(), "agentplane-queue-cost-"));
  const store = createSqliteStore({ path: join(dir, "agentplane.db") });
  const raw = (store.db as unknown as { $client: Database.Database }).$client;
  // SQLite keeps at least a few pages whatever this says.
  raw.pragma("cache_size = 0");
  const now = Date.now();
  raw.exec(seedTenants(SQLITE, now));
  raw.exec(seedAgents(SQLITE, now));
  let seeded = 0;
  let seededEvents = 0;
  let seededTenants = 0;
  let seededSenders = 0;
  return {
    queue: store.queue,
    queuedCount: (tenantId) => store.runs.queuedCount(tenantId),
    retention: store.retention,
    overview: store.overview,
    runs: store.runs,
    async seed(perTenant, tenants = TENANTS, ended = false) {
      raw.exec(seedRuns(SQLITE, seeded, perTenant, tenants, Date.now(), ended));
      seeded += perTenant;
    },
    async seedEvents(n) {
      raw.exec(seedEvents(SQLITE, seededEvents, n));
      seededEvents += n;
    },
    async seedMemberships(n) {
      for (const statement of seedMemberships(SQLITE, seededTenants, n)) raw.exec(statement);
      seededTenants += n;
    },
    memberships: store.members.memberships,
    async seedSenders(n) {
      for (const statement of seedSenders(SQLITE, seededSenders, n)) raw.exec(statement);
      seededSenders += n;
    },
    seedSchedules: async () => seedSchedules(SQLITE).forEach((statement) => raw.exec(statement)),
    schedules: store.schedules,
    lookups: store.webhooks,
    endRunning: async () => void raw.exec(END_RUNNING),
    cost: async () => bytesRead() / 4096,
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// Pages per claimed run over the counted claims of a backlog.
async function costPerRun(e: Engine): Promise<number> {
  let pages = 0;
  let claimed = 0;
  for (let i = 0; i < CLAIMS; i++) {
    const before = await e.cost();
    const runs = await e.queue.claim("worker", CLAIM, 60_000, 3, Date.now(), []);
    const after = await e.cost();
    expect(runs).toHaveLength(CLAIM);
    if (i < WARM_UP) continue;
    pages += after - before;
    claimed += runs.length;
  }
  return pages / claimed;
}

// Pages per call of `operation` over `calls` calls, after WARM_UP uncounted.
async function costPerCall(e: Engine, calls: number, operation: () => Promise<unknown>): Promise<number> {
  let pages = 0;
  for (let i = 0; i < WARM_UP + calls; i++) {
    const before = await e.cost();
    await operation();
    const after = await e.cost();
    if (i >= WARM_UP) pages += after - before;
  }
  return pages / calls;
}

// Pages per call of each operation after `grow` added the first count of
// rows, then after it added the second: past twice the first cost and two
// pages, an operation's cost grew with the rows. Several operations share
// one seeding, the suite's dearest part.
async function staysFlat(e: Engine, grow: (n: number) => Promise<void>, [first, more]: [number, number], operations: Record<string, () => Promise<unknown>>): Promise<void> {
  const costs = async () => {
    const pages: Record<string, number> = {};
    for (const [name, operation] of Object.entries(operations)) pages[name] = await costPerCall(e, 6, operation);
    return pages;
  };
  await grow(first);
  const small = await costs();
  await grow(more);
  const large = await costs();
  for (const pages of Object.values(small)) expect(pages).toBeGreaterThan(0);
  expect({ small, large, grew: grewPast(small, large) }).toMatchObject({ grew: [] });
}

const TENANT = "ten-1";
const run = (): RunInsert => {
  const t = Date.now();
  return { id: newId("run"), tenantId: TENANT, agentId: "agt-1", input: null, status: "queued", steps: [], createTime: t, updateTime: t };
};
const event = (): IngestItem => {
  const t = Date.now();
  const id = newId("evt");
  return {
    event: { id, tenantId: TENANT, sourceId: "src-1", eventType: "cost", payload: {}, receiveTime: t, idempotencyKey: id, matchedTriggerIds: [], createTime: t, updateTime: t },
    runs: [{ ...run(), eventId: id }],
    maxQueuedRuns: 1_000_000,
  };
};

// The operations whose cost at the large backlog is past twice the small
// one's (and two pages), each shown beside both costs when any is.
const grewPast = (small: Record<string, number>, large: Record<string, number>) =>
  Object.keys(large).filter((operation) => large[operation]! > 2 * small[operation]! + 2);

// What each quota-checking operation costs per call, at the current backlog.
async function quotaCosts(e: Engine): Promise<Record<string, number>> {
  const costs: Record<string, number> = {
    count: await costPerCall(e, 6, () => e.queuedCount(TENANT)),
    "queue a run": await costPerCall(e, 6, () => e.queue.insertMany([run()], 1_000_000)),
  };
  if (e.webhooks) costs.ingest = await costPerCall(e, 6, () => e.webhooks!.ingest(event(), 60_000));
  return costs;
}

describe.each([
  ["SQLite", sqliteEngine],
  ["PostgreSQL", postgresEngine],
])("queue costs on %s", (_name, open) => {
  let e: Engine;
  beforeEach(async () => {
    e = await open();
  });
  afterEach(() => e.close());

  it("a claim stays the same per claimed run with 50,000 runs queued as with 1,000, on a never-analyzed table and cached plans", async () => {
    await e.seed(100);
    const small = await costPerRun(e);
    await e.endRunning();
    await e.seed(4_900);
    const large = await costPerRun(e);
    expect(small).toBeGreaterThan(0);
    expect(large).toBeLessThanOrEqual(2 * small);
  });

  it("checking a tenant's queued-run quota costs the same with 50,000 of its runs queued as with 1,000", async () => {
    await e.seed(100, 1);
    expect(await e.queuedCount(TENANT)).toBe(100);
    await e.seed(900, 1);
    const small = await quotaCosts(e);
    await e.seed(49_000, 1);
    const large = await quotaCosts(e);
    // Each operation but the count queued a run per call, at both backlogs.
    const queuedByCalls = 2 * (WARM_UP + 6) * (Object.keys(large).length - 1);
    expect(await e.queuedCount(TENANT)).toBe(50_000 + queuedByCalls);
    expect({ small, large, grew: grewPast(small, large) }).toMatchObject({ grew: [] });
  });

  it("a tenant's overview, with its queued runs now, costs the same with 50,000 of its runs queued as with 1,000", async () => {
    const overview = async (queued: number) =>
      expect(await e.overview.tenant(TENANT, { start: Date.now() - 600_001, bucketMs: 60_000, buckets: 10, top: 5 })).toMatchObject({ queued });
    await e.seed(1_000, 1);
    const small = await costPerCall(e, 6, () => overview(1_000));
    await e.seed(49_000, 1);
    const large = await costPerCall(e, 6, () => overview(50_000));
    expect(small).toBeGreaterThan(0);
    expect({ small, large, grew: large > 2 * small + 2 }).toMatchObject({ grew: false });
  });

  it("listing a tenant's runs, by status or not, costs the same with 50,000 of its runs queued as with 1,000", async () => {
    // Ended runs first, then the backlog, then a claim: the ended and the
    // running runs are the oldest, so a walk newest first that filters by
    // status would cross the whole backlog to reach them.
    await e.seed(50, 1, true);
    await e.seed(1_000, 1);
    expect(await e.queue.claim("worker", CLAIM, 60_000, 3, Date.now(), [])).toHaveLength(CLAIM);
    const costs = async () => {
      const costs: Record<string, number> = {};
      for (const status of ["queued", "running", "succeeded"] as const) {
        costs[status] = await costPerCall(e, 6, async () => expect(await e.runs.list(TENANT, { limit: 20, where: { status } })).toHaveLength(status === "running" ? CLAIM : 20));
      }
      // Every status, newest first and oldest first: a part per status.
      costs.newest = await costPerCall(e, 6, async () => expect(await e.runs.list(TENANT, { limit: 20 })).toHaveLength(20));
      costs.oldest = await costPerCall(e, 6, async () => expect(await e.runs.list(TENANT, { limit: 20, after: { id: "" } })).toHaveLength(20));
      costs.agent = await costPerCall(e, 6, async () => expect(await e.runs.list(TENANT, { limit: 20, where: { agentId: "agt-1" } })).toHaveLength(20));
      // The runs of a page of events (the events list): by event, never a walk of the tenant's runs.
      costs.events = await costPerCall(e, 6, async () => expect(await e.runs.idsForEvents(TENANT, ["evt-a", "evt-b"])).toEqual(new Map()));
      return costs;
    };
    const small = await costs();
    await e.seed(49_000, 1);
    const large = await costs();
    expect({ small, large, grew: grewPast(small, large) }).toMatchObject({ grew: [] });
  });

  it("reading a tenant's run changes (WatchRuns) costs the same with 50,000 of its runs queued as with 1,000", async () => {
    // From a cursor taken now: runs queued after it (read on runs_queued from
    // the cursor's id on) and runs of the backlog claimed after it (on
    // runs_changes); the backlog queued before it is not to be crossed.
    const costs = async () => {
      await e.endRunning();
      const from = Date.now() - 1;
      const fresh = Array.from({ length: 10 }, () => queuedRun({ tenantId: TENANT, agentId: "agt-1", input: null }, Date.now()));
      await e.queue.insertMany(fresh, 1_000_000);
      expect(await e.queue.claim("worker", CLAIM, 60_000, 3, Date.now(), [])).toHaveLength(CLAIM);
      return costPerCall(e, 6, async () => {
        const rows = await e.runs.list(TENANT, { limit: 100, after: { by: "updateTime", value: from, id: "" } });
        expect(rows.filter((r) => r.status === "queued").map((r) => r.id)).toEqual(fresh.map((r) => r.id));
        expect(rows.filter((r) => r.status === "running")).toHaveLength(CLAIM);
      });
    };
    await e.seed(1_000, 1);
    const small = await costs();
    await e.seed(49_000, 1);
    const large = await costs();
    expect(small).toBeGreaterThan(0);
    expect({ small, large, grew: large > 2 * small + 2 }).toMatchObject({ grew: false });
  });

  // The claim is planned (a generic plan) at a worker's first claim and kept;
  // a held run's writes and a cancel were too. Planned beside a backlog of
  // 50,000 queued runs with none ended (a drain), a statement naming status =
  // 'running' took a partial index of the runs that left the queue
  // (runs_status, runs_changes; neither leads with the id) and walked it
  // whole: as many pages as runs had ended. Planned on a nearly empty table
  // (a new deployment), the finish joined its batch to the whole primary key
  // (a hash join). Planned on an empty table (a worker's first heartbeat
  // after its runs were cancelled; on CI, any moment at which another
  // database's drop reset the connection's caches), the heartbeat and the
  // release walked runs_agent and the cancel runs_event: 320 pages at 50,000
  // runs, 930 at 150,000. Each is compared between 50,000 and 150,000 ended,
  // where each index has as many levels, so that only a walk grows.
  it.each([
    ["beside a backlog of 50,000 queued runs", "backlog"],
    ["on a nearly empty table", "nearly empty"],
    ["on an empty table", "empty"],
  ] as const)("a claim, a held run's writes by id (heartbeat, steps, finish, release) and a cancel, planned %s, cost the same with 150,000 runs ended as with 50,000", async (_when, table) => {
    const CALLS = WARM_UP + 6;
    const costs = async () => {
      await e.seed(CALLS * CLAIM, 1);
      const claim = await costPerCall(e, 6, async () => expect(await e.queue.claim("worker", CLAIM, 60_000, 3, Date.now(), [])).toHaveLength(CLAIM));
      await e.endRunning();
      // A run of its own for each call: twelve updates of one run leave
      // eleven dead versions that each lookup by id visits while the
      // cluster's xmin horizon keeps them (a backend of another database
      // connecting, say), which another suite beside this one made grow.
      await e.seed(5 * CALLS, 1);
      const runs = await e.queue.claim("worker", 5 * CALLS, 60_000, 3, Date.now(), []);
      expect(runs).toHaveLength(5 * CALLS);
      const ids = runs.map((r) => r.id);
      const [toBeat, toStep, toFinish, toRelease, toCancel] = [0, 1, 2, 3, 4].map((k) => ids.slice(k * CALLS, (k + 1) * CALLS));
      const costs = {
        claim,
        heartbeat: await costPerCall(e, 6, async () => {
          const id = toBeat!.shift()!;
          expect(await e.queue.heartbeat("worker", [id], 60_000, Date.now())).toEqual(new Set([id]));
        }),
        steps: await costPerCall(e, 6, async () => expect(await e.queue.recordSteps("worker", toStep!.shift()!, [], Date.now())).toBe(true)),
        finish: await costPerCall(e, 6, async () =>
          expect(await e.queue.finish("worker", toFinish!.shift()!, { status: "succeeded", steps: [], error: "" }, Date.now())).toBe(true),
        ),
        release: await costPerCall(e, 6, () => e.queue.release("worker", [toRelease!.shift()!], Date.now())),
        cancel: await costPerCall(e, 6, async () => expect(await e.queue.cancel(TENANT, toCancel!.shift()!, Date.now())).toMatchObject({ status: "cancelled" })),
      };
      await e.endRunning();
      return costs;
    };
    if (table === "backlog") await e.seed(50_000, 1);
    if (table === "empty") {
      // Each write finds nothing: the runs it names are gone (cancelled, deleted).
      const gone = ["run-gone"];
      expect(await e.queue.heartbeat("worker", gone, 60_000, Date.now())).toEqual(new Set());
      expect(await e.queue.recordSteps("worker", gone[0]!, [], Date.now())).toBe(false);
      expect(await e.queue.finish("worker", gone[0]!, { status: "succeeded", steps: [], error: "" }, Date.now())).toBe(false);
      await e.queue.release("worker", gone, Date.now());
      expect(await e.queue.cancel(TENANT, gone[0]!, Date.now())).toBeUndefined();
    }
    await costs();
    await e.seed(50_000, 1, true);
    const small = await costs();
    await e.seed(100_000, 1, true);
    const large = await costs();
    expect({ small, large, grew: grewPast(small, large) }).toMatchObject({ grew: [] });
  });

  // The API's reads of runs, made first while no run exists (a new
  // deployment's console polling its empty lists): a statement the main
  // pool keeps prepared may go on with a plan made then.
  it("reading a run, listing a tenant's runs and its overview, first done on an empty table, cost the same with 150,000 runs as with 50,000", async () => {
    const reads = {
      get: async () => expect(await e.runs.get(TENANT, "run-gone")).toBeUndefined(),
      list: async () => expect(await e.runs.list(TENANT, { limit: 20 })).toEqual([]),
      queued: async () => expect(await e.runs.list(TENANT, { limit: 20, where: { status: "queued" } })).toEqual([]),
      agent: async () => expect(await e.runs.list(TENANT, { limit: 20, where: { agentId: "agt-1" } })).toEqual([]),
      // The last ten minutes, not whole slots: the live query over runs and events.
      overview: async () => expect(await e.overview.tenant(TENANT, { start: Date.now() - 600_001, bucketMs: 60_000, buckets: 10, top: 5 })).toBeDefined(),
    };
    for (const read of Object.values(reads)) for (let i = 0; i < 10; i++) await read();
    const costs = async () => {
      const costs: Record<string, number> = {};
      costs.get = await costPerCall(e, 6, async () => expect(await e.runs.get(TENANT, "run-001-00000007")).toMatchObject({ status: "succeeded" }));
      costs.list = await costPerCall(e, 6, async () => expect(await e.runs.list(TENANT, { limit: 20 })).toHaveLength(20));
      costs.queued = await costPerCall(e, 6, async () => expect(await e.runs.list(TENANT, { limit: 20, where: { status: "queued" } })).toHaveLength(20));
      costs.agent = await costPerCall(e, 6, async () => expect(await e.runs.list(TENANT, { limit: 20, where: { agentId: "agt-1" } })).toHaveLength(20));
      costs.overview = await costPerCall(e, 6, reads.overview);
      return costs;
    };
    await e.seed(50_000, 1, true);
    await e.seed(100, 1);
    const small = await costs();
    await e.seed(100_000, 1, true);
    const large = await costs();
    expect({ small, large, grew: grewPast(small, large) }).toMatchObject({ grew: [] });
  });

  // The background work and the rare paths, first done on a new
  // deployment's empty tables: a prepared statement on the main pool
  // planned then (PostgreSQL switches to a generic plan once five custom
  // plans cost no less, and on an empty table a sequential scan costs
  // nothing) would go on reading the whole table at every call, as big as
  // it grows. The seal sums a slot of a tenant's runs and events (the
  // seeded ones lie below every slot's id range); retention deletes a batch
  // of the oldest ended runs and events; an event whose idempotency key is
  // held by an event past its window reads that event and releases the key.
  // Retention's events batch also grew with custom plans: it compared
  // runs.event_id with events.id in the latter's collation ("C"), which
  // runs_event is not in, so every event was joined to every run.
  it("the overview's seal, a retention batch and a released idempotency key, first done on empty tables, cost the same with 150,000 runs and events as with 50,000", async () => {
    let clock = Date.now() - 2 * 86_400_000;
    const seal = async () => {
      clock += SLOT_MS;
      expect(await e.overview.seal(TENANT, clock)).toBeGreaterThan(0);
    };
    // Up to the seeded runs' and events' time 1: the seal's watermark stays
    // where the clock has it.
    const prune = async (n = 10) => expect(await e.retention.prune(1_000, 10)).toMatchObject({ runs: n, events: n });
    // An event whose key was last used before its window (0 ms) ends.
    const reuse = async () => {
      const first = event();
      expect(await e.webhooks!.ingest(first, 60_000)).toMatchObject({ duplicate: false });
      const again = event();
      again.event.idempotencyKey = first.event.idempotencyKey;
      again.event.receiveTime = first.event.receiveTime + 1;
      expect(await e.webhooks!.ingest(again, 0)).toMatchObject({ duplicate: false, eventId: again.event.id });
    };
    while ((await e.overview.seal(TENANT, clock)) > 0);
    for (let i = 0; i < 10; i++) {
      await seal();
      await prune(0);
      if (e.webhooks) await reuse();
    }
    const costs = async () => {
      const costs: Record<string, number> = { seal: await costPerCall(e, 6, seal), prune: await costPerCall(e, 6, () => prune()) };
      if (e.webhooks) costs.reuse = await costPerCall(e, 6, reuse);
      return costs;
    };
    await e.seed(50_000, 1, true);
    await e.seedEvents(50_000);
    const small = await costs();
    await e.seed(100_000, 1, true);
    await e.seedEvents(100_000);
    const large = await costs();
    expect({ small, large, grew: grewPast(small, large) }).toMatchObject({ grew: [] });
  });

  // ListMemberships for a platform operator: a page of every tenant, newest
  // first, each with the operator's role in it, which costs a probe of the
  // members of that one tenant, however many tenants the operator is in.
  it("an operator's page of every tenant costs the same as a member of 100,000 tenants as of 10,000", async () => {
    const page = async () => expect((await e.memberships(OPERATOR, { limit: 20, everyTenant: true })).map((m) => m.role)).toEqual(new Array(20).fill("admin"));
    await staysFlat(e, (n) => e.seedMemberships(n), [10_000, 90_000], { page });
  });

  // A webhook's reads before its commit: its source by the token's digest
  // (unique, across every tenant) and the trigger candidates of its tenant
  // and source, with their agents. And the scheduler's tick, which reads
  // every enabled schedule trigger, of every tenant, with its last slot:
  // tenants that only receive webhooks have none, and must not make it
  // dearer. Each planned first on tables holding none.
  it("a webhook's source and trigger lookups, and the scheduler's read of the schedule triggers with their last slots, first done on empty tables, cost the same with 50,000 sending tenants as with 5,000", async () => {
    const NTH = "00000007";
    const lookups = async () => {
      expect(await e.lookups.findSourceByTokenDigest(`digest-${NTH}`, Date.now())).toMatchObject({ id: `src-ts-${NTH}`, tenantId: `ts-${NTH}` });
      expect((await e.lookups.matchCandidates(`ts-${NTH}`, `src-ts-${NTH}`)).map((t) => t.id)).toEqual([`trg-ts-${NTH}`]);
    };
    const due = async () => (await e.schedules.scheduleTriggers()).map((t) => [t.id, t.lastSlot]);
    for (let i = 0; i < 10; i++) {
      expect(await e.lookups.findSourceByTokenDigest(`digest-${NTH}`, Date.now())).toBeUndefined();
      expect(await e.lookups.matchCandidates(`ts-${NTH}`, `src-ts-${NTH}`)).toEqual([]);
      expect(await due()).toEqual([]);
    }
    await e.seedSchedules();
    const expected = Array.from({ length: TENANTS }, (_, i) => [`trg-cron-${i + 1}`, SLOTS * SLOT_EVERY]).sort();
    const schedules = async () => expect((await due()).sort()).toEqual(expected);
    await staysFlat(e, (n) => e.seedSenders(n), [5_000, 45_000], { lookups, schedules });
  });

  it("a retention batch costs the same per deleted run with 50,000 runs queued as with 1,000", async () => {
    const BATCH = 10;
    const pruneCost = async () => {
      await e.seed(((WARM_UP + 6) * BATCH) / TENANTS, TENANTS, true);
      let deleted = 0;
      const pages = await costPerCall(e, 6, async () => {
        const pruned = await e.retention.prune(Date.now(), BATCH);
        deleted += pruned!.runs;
      });
      expect(deleted).toBe((WARM_UP + 6) * BATCH);
      return pages / BATCH;
    };
    await e.seed(100);
    const small = await pruneCost();
    await e.seed(4_900);
    const large = await pruneCost();
    expect(small).toBeGreaterThan(0);
    expect(large).toBeLessThanOrEqual(2 * small + 2);
  });
});
