// The run queue alone (no HTTP), SQLite and PostgreSQL side by side:
//   claim latency: claims of 8 against a backlog of 100,000 queued runs over
//     100 tenants, and of 10,000 in one tenant, each claim's runs finished
//     before the next; then tenant B queues one run while A's backlog
//     executes, and the bench reports in which claim B's run starts;
//   throughput: trivial runs (one step record, then the outcome) completed
//     per second by the real Worker (8 at a time, as AGENTPLANE_WORKER_CONCURRENCY
//     defaults), with one worker, and on PostgreSQL with two workers on pools
//     of their own (two replicas).
// SQLite is a temporary file (WAL, synchronous=FULL); PostgreSQL a database
// created for the run on AGENTPLANE_BENCH_POSTGRES_URL (default the local
// server) and dropped after. It reports; it fails only when a run is lost.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import postgres from "postgres";
import { newId } from "../../src/lib/ids.js";
import { createLogger } from "../../src/log.js";
import type { Executor } from "../../src/runtime/executor.js";
import { Worker } from "../../src/runtime/worker.js";
import { migratePostgres, openPostgres, type OpenedPostgres } from "../../src/store/postgres/open.js";
import { createPgRunQueue } from "../../src/store/postgres/queue.js";
import type { RunInsert } from "../../src/store/rows.js";
import { SignalHub } from "../../src/store/signal-hub.js";
import { createSqliteStore } from "../../src/store/sqlite/store.js";
import type { RunQueue } from "../../src/store/store.js";
import { positiveInt } from "../lib/env.js";
import { printTable } from "../lib/table.js";

const ADMIN_URL = process.env.AGENTPLANE_BENCH_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const CLAIMS = positiveInt("BENCH_QUEUE_CLAIMS", 200);
const RUNS = positiveInt("BENCH_QUEUE_RUNS", 5000);
const LEASE = 60_000;

interface Engine {
  name: string;
  queue: RunQueue;
  // A queue on a connection of its own (another replica), when the engine has them.
  replica?(): RunQueue;
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
  const name = `agentplane_bench_${randomBytes(6).toString("hex")}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const main = openPostgres({ url: url.toString() });
  await migratePostgres(main);
  const pools: OpenedPostgres[] = [main];
  return {
    name: "PostgreSQL",
    queue: createPgRunQueue(main.sql, new SignalHub()),
    replica() {
      const p = openPostgres({ url: url.toString() });
      pools.push(p);
      return createPgRunQueue(p.sql, new SignalHub());
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
      for (const p of pools) await p.sql.end();
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
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

// The real worker, trivial runs: one step record, then the outcome.
async function throughput(e: Engine, tenants: string[], agentOf: (t: string) => string, queues: RunQueue[]): Promise<string[]> {
  await e.reset();
  const per = Math.ceil(RUNS / tenants.length);
  for (const t of tenants) await queueRuns(e, t, agentOf(t), per);
  const total = per * tenants.length;
  let executed = 0;
  const executor: Executor = {
    async execute(run, ctx) {
      await ctx.recordStep({ kind: "tool_call", skillId: "", tool: "noop", arguments: {}, result: {}, error: "", startTime: Date.now(), endTime: Date.now() });
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

async function main(): Promise<void> {
  const tenants = Array.from({ length: 101 }, () => newId("ten"));
  const agents = new Map(tenants.map((t) => [t, newId("agt")]));
  const agentOf = (t: string) => agents.get(t)!;
  const latency: string[][] = [];
  const fair: string[][] = [];
  const rate: string[][] = [];
  for (const open of [sqlite, pg]) {
    const e = await open();
    try {
      await e.seed(tenants, agentOf);
      latency.push(await claimLatency(e, tenants.slice(0, 100), agentOf, 1000));
      latency.push(await claimLatency(e, tenants.slice(0, 1), agentOf, 10_000));
      latency.push(await claimLatency(e, tenants.slice(0, 1), agentOf, 1));
      fair.push(await fairness(e, tenants[0]!, tenants[100]!, agentOf));
      rate.push(await throughput(e, tenants.slice(0, 10), agentOf, [e.queue]));
      if (e.replica) rate.push(await throughput(e, tenants.slice(0, 10), agentOf, [e.replica(), e.replica()]));
    } finally {
      await e.close();
    }
  }
  console.log(`\nclaim of 8 (ms), ${CLAIMS} claims, each claim's runs finished before the next`);
  printTable(["engine", "backlog (tenants x runs)", "p50", "p99"], latency, [0, 1]);
  console.log("\ntenant B's single run behind tenant A's 10,000 (8 of A's running): claims of one until B's starts");
  printTable(["engine", "B starts in claim", "that claim (ms)"], fair, [0]);
  console.log(`\ntrivial runs completed per second (real Worker, 8 at a time per worker, ${RUNS} runs over 10 tenants)`);
  printTable(["engine", "workers", "runs", "runs/s"], rate, [0]);
}

await main();
