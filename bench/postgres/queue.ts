// The run queue alone (no HTTP), SQLite and PostgreSQL side by side:
//   claim latency: claims of 8 against a backlog of 100,000 queued runs over
//     100 tenants, and of 10,000 in one tenant, each claim's runs finished
//     before the next; then tenant B queues one run while A's backlog
//     executes, and the bench reports in which claim B's run starts;
//   throughput: trivial runs (one step record, then the outcome) completed
//     per second by the real Worker (8 at a time, as AGENTPLANE_WORKER_CONCURRENCY
//     defaults), with one worker, and on PostgreSQL with two workers on pools
//     of their own (two replicas);
//   start latency: the real store (openStore, so the worker wakes on the
//     store's signals: LISTEN/NOTIFY on PostgreSQL) takes one run at a time
//     at a steady rate, insertMany → the executor starts it, p50/p99; and
//     tenant B's runs' start latency with and without tenant A's 10,000
//     queued runs executing;
//   graphile-worker, the peer: on the same PostgreSQL (a database of its own)
//     with the same concurrency, trivial jobs completed per second (all
//     queued first) and addJob → task start at the same steady rate.
// SQLite is a temporary file (WAL, synchronous=FULL); PostgreSQL a database
// created for the run on AGENTPLANE_BENCH_POSTGRES_URL (default the local
// server) and dropped after. It reports; it fails only when a run is lost.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { Logger, makeWorkerUtils, run as runGraphile, runMigrations as migrateGraphile } from "graphile-worker";
import { newId } from "../../src/lib/ids.js";
import { createLogger } from "../../src/log.js";
import type { Executor } from "../../src/runtime/executor.js";
import { Worker } from "../../src/runtime/worker.js";
import { openStore } from "../../src/store/open.js";
import { migratePostgres, openPostgres, type OpenedPostgres } from "../../src/store/postgres/open.js";
import { createPgRunQueue } from "../../src/store/postgres/queue.js";
import type { RunInsert } from "../../src/store/rows.js";
import { createSqliteStore } from "../../src/store/sqlite/store.js";
import type { RunQueue, Store } from "../../src/store/store.js";
import { positiveInt } from "../lib/env.js";
import { printTable } from "../lib/table.js";
import { freshDatabase } from "../lib/postgres.js";

const CLAIMS = positiveInt("BENCH_QUEUE_CLAIMS", 200);
const RUNS = positiveInt("BENCH_QUEUE_RUNS", 5000);
const LEASE = 60_000;
// The steady rate of the start-latency modes, and how many runs (or jobs) each measures.
const RATE = positiveInt("BENCH_QUEUE_RATE", 200);
const SAMPLES = positiveInt("BENCH_QUEUE_SAMPLES", 1000);
const CONCURRENCY = 8;

interface Engine {
  name: string;
  queue: RunQueue;
  // A queue on a connection of its own (another replica), when the engine has them.
  replica?(): RunQueue;
  // The whole store as the service opens it, its signals included.
  store(): Promise<Store>;
  seed(tenants: string[], agentOf: (tenant: string) => string): Promise<void>;
  count(status: string): Promise<number>;
  reset(): Promise<void>;
  // After a bulk insert: statistics as autovacuum would have them.
  settle(): Promise<void>;
  close(): Promise<void>;
}

const RESET = "delete from runs";

async function sqlite(): Promise<Engine> {
  const dir = mkdtempSync(join(tmpdir(), "agentplane-bench-queue-"));
  const path = join(dir, "queue.db");
  const store = createSqliteStore({ path });
  // The bench's own connection, for seeding and counting.
  const raw = new Database(path);
  return {
    name: "SQLite",
    queue: store.queue,
    store: async () => store,
    async seed(tenants, agentOf) {
      const tenant = raw.prepare("insert into tenants (id, slug, create_time, update_time) values (?, ?, 0, 0)");
      const agent = raw.prepare(
        `insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, enabled, create_time, update_time)
         values (?, ?, 'a', '{}', 16, 120000, 1, 0, 0)`,
      );
      raw.transaction(() => tenants.forEach((t) => (tenant.run(t, t), agent.run(agentOf(t), t))))();
    },
    count: async (status) => (raw.prepare("select count(*) as n from runs where status = ?").get(status) as { n: number }).n,
    reset: async () => void raw.exec(RESET),
    settle: async () => {},
    async close() {
      raw.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}


async function pg(): Promise<Engine> {
  const { url, drop } = await freshDatabase();
  const main = openPostgres({ url });
  await migratePostgres(main);
  const pools: OpenedPostgres[] = [main];
  const stores: Store[] = [];
  return {
    name: "PostgreSQL",
    queue: createPgRunQueue(main.sql),
    replica() {
      const p = openPostgres({ url });
      pools.push(p);
      return createPgRunQueue(p.sql);
    },
    async store() {
      const opened = await openStore({ databaseUrl: url, sqlite: { path: "", migrate: false } });
      stores.push(opened);
      return opened;
    },
    async seed(tenants, agentOf) {
      for (const t of tenants) {
        await main.sql`insert into tenants (id, slug, create_time, update_time) values (${t}, ${t}, 0, 0)`;
        await main.sql`
          insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, enabled, create_time, update_time)
          values (${agentOf(t)}, ${t}, 'a', '{}', 16, 120000, true, 0, 0)`;
      }
    },
    async count(status) {
      const [r] = await main.sql<{ n: number }[]>`select count(*)::int as n from runs where status = ${status}`;
      return r!.n;
    },
    reset: async () => {
      await main.sql.unsafe(RESET);
      await main.sql.unsafe("vacuum analyze runs");
    },
    settle: async () => void (await main.sql.unsafe("analyze runs")),
    async close() {
      for (const s of stores) await s.close();
      for (const p of pools) await p.sql.end();
      await drop();
    },
  };
}

const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const ms = (x: number) => x.toFixed(2);

function runRows(tenant: string, agent: string, n: number): RunInsert[] {
  const t = Date.now();
  return Array.from({ length: n }, () => ({ id: newId("run"), tenantId: tenant, agentId: agent, status: "queued" as const, steps: [], input: null, createTime: t, updateTime: t }));
}

async function queueRuns(e: Engine, tenant: string, agent: string, n: number): Promise<string[]> {
  const rows = runRows(tenant, agent, n);
  for (let i = 0; i < rows.length; i += 1000) await e.queue.insertMany(rows.slice(i, i + 1000));
  return rows.map((r) => r.id);
}

const ok = { status: "succeeded" as const, steps: [], output: null, error: "" };

// Claims of 8 against the backlog; each claim's runs are finished before the next.
async function claimLatency(e: Engine, tenants: string[], agentOf: (t: string) => string, perTenant: number): Promise<string[]> {
  await e.reset();
  for (const t of tenants) await queueRuns(e, t, agentOf(t), perTenant);
  await e.settle();
  const times: number[] = [];
  for (let i = 0; i < CLAIMS; i++) {
    const started = performance.now();
    const got = await e.queue.claim("bench", 8, LEASE, 3, Date.now(), []);
    times.push(performance.now() - started);
    await Promise.all(got.map((r) => e.queue.finish("bench", r.id, ok, Date.now())));
  }
  return [`${e.name}`, `${tenants.length} x ${perTenant}`, ms(percentile(times, 50)), ms(percentile(times, 99))];
}

// Tenant A's backlog executes (8 of its runs running); B queues one run:
// in which claim of one does it start?
async function fairness(e: Engine, a: string, b: string, agentOf: (t: string) => string): Promise<string[]> {
  await e.reset();
  await queueRuns(e, a, agentOf(a), 10_000);
  await e.settle();
  await e.queue.claim("bench", 8, LEASE, 3, Date.now(), []);
  const [single] = await queueRuns(e, b, agentOf(b), 1);
  for (let n = 1; n <= 100; n++) {
    const started = performance.now();
    const got = await e.queue.claim("bench", 1, LEASE, 3, Date.now(), []);
    const took = performance.now() - started;
    if (got.some((r) => r.id === single)) return [e.name, String(n), ms(took)];
  }
  return [e.name, "not in 100 claims", ""];
}

// The real worker, trivial runs: one step, started and ended, then the outcome.
async function throughput(e: Engine, tenants: string[], agentOf: (t: string) => string, queues: RunQueue[]): Promise<string[]> {
  await e.reset();
  const per = Math.ceil(RUNS / tenants.length);
  for (const t of tenants) await queueRuns(e, t, agentOf(t), per);
  const total = per * tenants.length;
  let executed = 0;
  const executor: Executor = {
    async execute(run, ctx) {
      ctx.startStep({ kind: "tool_call", skillId: "", tool: "noop", arguments: {} }).end({ result: {}, error: "" });
      executed++;
      return { status: "succeeded", output: { run: run.id } };
    },
  };
  const log = createLogger("silent");
  const workers = queues.map((queue) => new Worker({ queue, executor, log, concurrency: 8, leaseMs: LEASE, maxAttempts: 3 }));
  const started = performance.now();
  for (const w of workers) w.start();
  while ((await e.count("succeeded")) < total) await new Promise((r) => setTimeout(r, 20));
  const seconds = (performance.now() - started) / 1000;
  await Promise.all(workers.map((w) => w.stop(1000)));
  if (executed !== total) throw new Error(`${e.name}: ${executed} executions for ${total} runs`);
  return [e.name, String(queues.length), String(total), (total / seconds).toFixed(0)];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// A trivial executor (one step, started and ended, then the outcome) that notes when each run starts.
function startWatch() {
  const started = new Map<string, number>();
  const executor: Executor = {
    async execute(run, ctx) {
      started.set(run.id, performance.now());
      ctx.startStep({ kind: "tool_call", skillId: "", tool: "noop", arguments: {} }).end({ result: {}, error: "" });
      return { status: "succeeded", output: { run: run.id } };
    },
  };
  return {
    executor,
    // Milliseconds from `queued` until the run with this id started.
    async latency(id: string, queued: number): Promise<number> {
      const deadline = performance.now() + 30_000;
      while (!started.has(id)) {
        if (performance.now() > deadline) throw new Error(`run ${id} did not start in 30 s`);
        await new Promise((r) => setImmediate(r));
      }
      return started.get(id)! - queued;
    },
  };
}

function realWorker(store: Store, executor: Executor): Worker {
  const worker = new Worker({ queue: store.queue, executor, log: createLogger("silent"), concurrency: CONCURRENCY, leaseMs: LEASE, maxAttempts: 3 });
  // Woken by the store's signals, as runtime/runtime.ts wires a worker.
  store.signals.onRunsQueued(() => worker.wake());
  return worker;
}

// One run at a time at RATE/s through the real store: insertMany → the executor starts it.
async function startLatency(e: Engine, tenant: string, agent: string): Promise<string[]> {
  await e.reset();
  const store = await e.store();
  const watch = startWatch();
  const worker = realWorker(store, watch.executor);
  worker.start();
  const pending: Promise<number>[] = [];
  const began = performance.now();
  for (let i = 0; i < SAMPLES; i++) {
    const due = began + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const [row] = runRows(tenant, agent, 1);
    const queued = performance.now();
    await store.queue.insertMany([row!]);
    pending.push(watch.latency(row!.id, queued));
  }
  const times = await Promise.all(pending);
  await worker.stop(1000);
  return [e.name, "ours: insertMany → executor starts", `${RATE}/s`, String(SAMPLES), ms(percentile(times, 50)), ms(percentile(times, 99))];
}

// Tenant B queues one run at a time (each after the last started), while the
// real worker executes tenant A's 10,000 queued runs, or with nothing else queued.
async function fairStart(e: Engine, a: string, b: string, agentOf: (t: string) => string, backlog: number): Promise<string[]> {
  await e.reset();
  const store = await e.store();
  const watch = startWatch();
  if (backlog) await queueRuns(e, a, agentOf(a), backlog);
  await e.settle();
  const worker = realWorker(store, watch.executor);
  worker.start();
  await sleep(200);
  const times: number[] = [];
  for (let i = 0; i < 20; i++) {
    const [row] = runRows(b, agentOf(b), 1);
    const queued = performance.now();
    await store.queue.insertMany([row!]);
    times.push(await watch.latency(row!.id, queued));
    await sleep(20);
  }
  const aLeft = await e.count("queued");
  await worker.stop(1000);
  return [e.name, backlog ? `${backlog} of A queued (${aLeft} still queued after)` : "none", ms(percentile(times, 50)), ms(Math.max(...times))];
}

// graphile-worker on a database of its own: jobs completed per second (all
// queued first), then addJob → task start at RATE/s, with CONCURRENCY.
async function graphile(): Promise<{ rate: string[]; latency: string[] }> {
  const { url, drop } = await freshDatabase();
  try {
    await migrateGraphile({ connectionString: url, logger: quietLogger });
    const utils = await makeWorkerUtils({ connectionString: url, logger: quietLogger });
    try {
      const started = new Map<number, number>();
      const options = {
        connectionString: url,
        concurrency: CONCURRENCY,
        noHandleSignals: true,
        logger: quietLogger,
        taskList: { noop: async (payload: unknown) => void started.set((payload as { i: number }).i, performance.now()) },
      };
      for (let i = 0; i < RUNS; i += 1000)
        await utils.addJobs(Array.from({ length: Math.min(1000, RUNS - i) }, (_, k) => ({ identifier: "noop", payload: { i: -1 - i - k } })));
      let completed = 0;
      const runner = await runGraphile(options);
      const began = performance.now();
      runner.events.on("job:complete", () => void completed++);
      while (completed < RUNS) await sleep(5);
      const seconds = (performance.now() - began) / 1000;
      const pending: Promise<number>[] = [];
      const latencyBegan = performance.now();
      for (let i = 0; i < SAMPLES; i++) {
        const due = latencyBegan + (i * 1000) / RATE;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const queued = performance.now();
        await utils.addJob("noop", { i });
        pending.push(
          (async () => {
            const deadline = performance.now() + 30_000;
            while (!started.has(i)) {
              if (performance.now() > deadline) throw new Error(`graphile-worker job ${i} did not start in 30 s`);
              await new Promise((r) => setImmediate(r));
            }
            return started.get(i)! - queued;
          })(),
        );
      }
      const times = await Promise.all(pending);
      await runner.stop();
      await runner.promise;
      return {
        rate: ["graphile-worker", "1", String(RUNS), (RUNS / seconds).toFixed(0)],
        latency: ["PostgreSQL", "graphile-worker: addJob → task starts", `${RATE}/s`, String(SAMPLES), ms(percentile(times, 50)), ms(percentile(times, 99))],
      };
    } finally {
      await utils.release();
    }
  } finally {
    // The runner ends its pool without waiting for it: a forced drop before
    // then kills connections whose errors nothing handles.
    await sleep(1000);
    await drop();
  }
}

const quietLogger = new Logger(() => () => {});

async function main(): Promise<void> {
  const tenants = Array.from({ length: 101 }, () => newId("ten"));
  const agents = new Map(tenants.map((t) => [t, newId("agt")]));
  const agentOf = (t: string) => agents.get(t)!;
  const latency: string[][] = [];
  const fair: string[][] = [];
  const rate: string[][] = [];
  const fairMs: string[][] = [];
  const start: string[][] = [];
  for (const open of [sqlite, pg]) {
    const e = await open();
    try {
      await e.seed(tenants, agentOf);
      latency.push(await claimLatency(e, tenants.slice(0, 100), agentOf, 1000));
      latency.push(await claimLatency(e, tenants.slice(0, 1), agentOf, 10_000));
      latency.push(await claimLatency(e, tenants.slice(0, 1), agentOf, 1));
      fair.push(await fairness(e, tenants[0]!, tenants[100]!, agentOf));
      fairMs.push(await fairStart(e, tenants[0]!, tenants[100]!, agentOf, 0));
      fairMs.push(await fairStart(e, tenants[0]!, tenants[100]!, agentOf, 10_000));
      rate.push(await throughput(e, tenants.slice(0, 10), agentOf, [e.queue]));
      if (e.replica) rate.push(await throughput(e, tenants.slice(0, 10), agentOf, [e.replica(), e.replica()]));
      start.push(await startLatency(e, tenants[1]!, agentOf(tenants[1]!)));
    } finally {
      await e.close();
    }
  }
  const peer = await graphile();
  rate.push(peer.rate);
  start.push(peer.latency);
  console.log(`\nclaim of 8 (ms), ${CLAIMS} claims, each claim's runs finished before the next`);
  printTable(["engine", "backlog (tenants x runs)", "p50", "p99"], latency, [0, 1]);
  console.log("\ntenant B's single run behind tenant A's 10,000 (8 of A's running): claims of one until B's starts");
  printTable(["engine", "B starts in claim", "that claim (ms)"], fair, [0]);
  console.log("\ntenant B's run-start latency (ms, 20 runs one after another; real store and Worker), with and without tenant A's backlog executing");
  printTable(["engine", "A's backlog", "B p50", "B max"], fairMs, [0]);
  console.log(`\ntrivial runs (jobs) completed per second (${CONCURRENCY} at a time per worker, ${RUNS} queued first over 10 tenants; graphile-worker: one runner, a noop task)`);
  printTable(["engine", "workers", "runs", "runs/s"], rate, [0]);
  console.log(`\nstart latency (ms): one run (job) queued at a time at a steady rate, ${CONCURRENCY} at a time; targets p50 < 5, p99 < 25`);
  printTable(["engine", "what", "rate", "samples", "p50", "p99"], start, [0, 1]);
}

await main();
