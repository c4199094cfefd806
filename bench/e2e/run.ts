// End to end on SQLite and PostgreSQL (BENCH_ENGINES, default both; each
// PostgreSQL session on a database created for it on
// AGENTPLANE_BENCH_POSTGRES_URL and dropped after): the built `agentplane serve` as a child process takes
// webhooks and executes their runs (no step, or one tool call on a trivial
// local MCP server). Measures the 202's latency at a steady offered rate and at full
// speed, and whether execution keeps up (runs completed per second, queued
// backlog before and after), with runs in worker threads (the default) and
// on the HTTP thread (AGENTPLANE_WORKER_THREADS=0), alternated. On
// PostgreSQL also ingest alone on two `serve --role api` replicas on one
// database, the load split evenly across them.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import autocannon, { type Result } from "autocannon";
import { positiveInt } from "../lib/env.js";
import { describeHost, removeScratchDir, runBench, scratchDir } from "../lib/run.js";
import { printTable } from "../lib/table.js";
import { startTrivialMcp, type TrivialMcp } from "../lib/trivial-mcp.js";
import { freshDatabase } from "../lib/postgres.js";
import { CLI, counter, drain, emptyPlan, freePort, Service, startJwks, SUBJECT, type Counter } from "../lib/serve.js";

const exec = promisify(execFile);
const BODY = JSON.stringify({ event_type: "order.created", payload: { order: 1, note: "x".repeat(900) } });

const DURATION = positiveInt("BENCH_DURATION", 10);
const RATE = positiveInt("BENCH_RATE", 1000);
const ROUNDS = positiveInt("BENCH_ROUNDS", 1);
// Connections for the paced phase: enough that the offered rate holds while
// acks take up to connections/rate seconds.
const PACED_CONNECTIONS = positiveInt("BENCH_PACED_CONNECTIONS", 200);
const MAX_CONNECTIONS = positiveInt("BENCH_CONNECTIONS", 50);
const DRAIN_TIMEOUT_MS = positiveInt("BENCH_DRAIN_SECONDS", 30) * 1000;
const ENGINES = (process.env.BENCH_ENGINES ?? "sqlite,postgres").split(",").map((e) => e.trim());
for (const e of ENGINES) if (e !== "sqlite" && e !== "postgres") throw new Error(`BENCH_ENGINES: "sqlite" and/or "postgres", got "${e}"`);

interface Variant {
  name: string;
  // AGENTPLANE_WORKER_THREADS; undefined: the default.
  threads?: string;
  // Role api: runs are only queued (the ingest-alone reference).
  queueOnly?: boolean;
  // `serve` processes on one database (PostgreSQL only), the load split across them.
  replicas?: number;
}

const VARIANTS: Variant[] = [
  { name: "all, worker threads (default)" },
  { name: "all, threads=0 (same thread)", threads: "0" },
  ...(process.env.BENCH_INGEST_ONLY === "0" ? [] : [{ name: "api (runs queued, not executed)", queueOnly: true }]),
];
const POSTGRES_ONLY: Variant[] = process.env.BENCH_INGEST_ONLY === "0" ? [] : [{ name: "api x2 replicas (runs queued)", queueOnly: true, replicas: 2 }];
const variantsOf = (engine: string) => (engine === "postgres" ? [...VARIANTS, ...POSTGRES_ONLY] : VARIANTS);

// What each event's run does: `step` one tool call on the trivial MCP
// server; `empty` an agent with no steps (claimed, its agent and event read,
// finished: the least a run costs).
const RUN_KINDS = (process.env.BENCH_RUNS ?? "empty,step").split(",").map((k) => k.trim());
for (const kind of RUN_KINDS) if (kind !== "empty" && kind !== "step") throw new Error(`BENCH_RUNS: "empty" and/or "step", got "${kind}"`);

interface PhaseResult {
  engine: string;
  variant: string;
  queueOnly: boolean;
  run: string;
  phase: string;
  offered: string;
  ackPerSec: number;
  p50: number;
  p99: number;
  p999: number;
  timeouts: number;
  runsPerSec: number;
  backlogStart: number;
  backlogEnd: number;
  drainSeconds: number | undefined;
}

async function load(url: string, token: string, seconds: number, connections: number, rate?: number): Promise<Result> {
  const result = await autocannon({
    url: `${url}/webhooks/events`,
    method: "POST",
    // Every event its own idempotency key, as real senders send.
    headers: { "content-type": "application/json", "x-webhook-token": token, "idempotency-key": "bench-[<id>]" },
    idReplacement: true,
    body: BODY,
    connections,
    duration: seconds,
    workers: 1,
    ...(rate !== undefined && { overallRate: rate }),
  });
  // Any answer but 202 is a failure; requests unanswered after autocannon's
  // 10 s timeout (a stalled service) are counted and reported instead.
  if (Object.keys(result.statusCodeStats).some((c) => c !== "202") || result.errors > result.timeouts)
    throw new Error(`webhook load: ${result.errors} errors, ${result.timeouts} timeouts, status codes ${JSON.stringify(result.statusCodeStats)}`);
  return result;
}

// The load split evenly across the services (one autocannon each, at once);
// latency percentiles are the worst of theirs.
async function loadAll(urls: string[], token: string, seconds: number, connections: number, rate?: number): Promise<Result> {
  if (urls.length === 1) return load(urls[0]!, token, seconds, connections, rate);
  const parts = await Promise.all(urls.map((u) => load(u, token, seconds, Math.ceil(connections / urls.length), rate === undefined ? undefined : Math.ceil(rate / urls.length))));
  const worst = (k: "p50" | "p99" | "p99_9") => Math.max(...parts.map((p) => p.latency[k]));
  return {
    ...parts[0]!,
    "2xx": parts.reduce((n, p) => n + p["2xx"], 0),
    timeouts: parts.reduce((n, p) => n + p.timeouts, 0),
    latency: { ...parts[0]!.latency, p50: worst("p50"), p99: worst("p99"), p99_9: worst("p99_9") },
  };
}

async function phase(
  engine: string,
  variant: Variant,
  kind: string,
  name: string,
  services: Service[],
  count: Counter,
  webhookToken: string,
  connections: number,
  rate?: number,
): Promise<PhaseResult> {
  const before = await count.counts();
  const started = Date.now();
  const result = await loadAll(services.map((s) => s.url), webhookToken, DURATION, connections, rate);
  const seconds = (Date.now() - started) / 1000;
  const after = await count.counts();
  if (after.failed) throw new Error(`${after.failed} runs failed:\n${services[0]!.output}`);
  const drainSeconds = variant.queueOnly ? undefined : await drain(count, DRAIN_TIMEOUT_MS);
  return {
    engine,
    variant: variant.name,
    queueOnly: variant.queueOnly ?? false,
    run: kind,
    phase: name,
    offered: rate === undefined ? `max (${connections} conns)` : `${rate}/s`,
    ackPerSec: result["2xx"] / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    p999: result.latency.p99_9,
    timeouts: result.timeouts,
    runsPerSec: (after.done - before.done) / seconds,
    backlogStart: before.backlog,
    backlogEnd: after.backlog,
    drainSeconds,
  };
}

async function session(engine: string, variant: Variant, kind: string, mcp: TrivialMcp, jwks: { url: string; token: string }): Promise<PhaseResult[]> {
  const dir = scratchDir("agentplane-bench-e2e-");
  const db = engine === "postgres" ? await freshDatabase() : undefined;
  const services: Service[] = [];
  try {
    await exec(process.execPath, [CLI, "tenant", "create", "bench", "--admin", SUBJECT], {
      env: { PATH: process.env.PATH ?? "", AGENTPLANE_DATA_DIR: dir, ...(db && { AGENTPLANE_DATABASE_URL: db.url }) },
    });
    // One after another: the first has migrated when the next starts.
    for (let i = 0; i < (variant.replicas ?? 1); i++) {
      const env = { ...(variant.threads !== undefined && { AGENTPLANE_WORKER_THREADS: variant.threads }), ...(variant.queueOnly && { AGENTPLANE_ROLE: "api" }) };
      const s = new Service(dir, await freePort(), jwks.url, env, db?.url);
      services.push(s);
      await s.ready();
    }
    const service = services[0]!;
    const { skill } = await service.call<{ skill: { id: string } }>(jwks.token, "CreateSkill", { skill: { name: "trivial", mcpUrl: mcp.url } });
    const { agent } = await service.call<{ agent: { id: string } }>(jwks.token, "CreateAgent", {
      agent: { name: kind, skillIds: [skill.id], steps: [{ skillId: skill.id, tool: "ok", arguments: "" }] },
    });
    if (kind === "empty") await emptyPlan(dir, db?.url, agent.id);
    await service.call(jwks.token, "CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*" } } });
    const { token } = await service.call<{ token: string }>(jwks.token, "CreateWebhookSource", { webhookSource: { name: "bench" } });
    const count = counter(dir, db?.url);
    try {
      // Preflight: the event matches on every replica, and its run succeeds (the tool was called).
      const calls = mcp.calls();
      for (const s of services) {
        const res = await fetch(`${s.url}/webhooks/events`, { method: "POST", headers: { "content-type": "application/json", "x-webhook-token": token }, body: BODY });
        const body = (await res.json()) as { matched_triggers?: number };
        if (res.status !== 202 || body.matched_triggers !== 1) throw new Error(`preflight: ${res.status} ${JSON.stringify(body)}`);
      }
      if (!variant.queueOnly && ((await drain(count, 10_000)) === undefined || (await count.counts()).done !== 1 || mcp.calls() !== calls + (kind === "step" ? 1 : 0)))
        throw new Error(`preflight: the run did not succeed:\n${service.output}`);
      // Warm-up at half the rate, then let it drain.
      await loadAll(services.map((s) => s.url), token, 3, PACED_CONNECTIONS, Math.ceil(RATE / 2));
      if (!variant.queueOnly) await drain(count, DRAIN_TIMEOUT_MS);
      const results = [
        await phase(engine, variant, kind, "steady", services, count, token, PACED_CONNECTIONS, RATE),
        await phase(engine, variant, kind, "max", services, count, token, MAX_CONNECTIONS),
      ];
      for (const s of services) await s.stop();
      return results;
    } finally {
      await count.close();
    }
  } finally {
    for (const s of services) s.child.kill("SIGKILL");
    await db?.drop();
    removeScratchDir(dir);
  }
}

async function main(): Promise<void> {
  console.log(`end to end (${ENGINES.join(", ")}; SQLite synchronous=FULL): webhook -> run (empty: no step; step: one tool call on a trivial MCP skill)`);
  console.log(`${describeHost()}; ${DURATION} s per phase; steady: ${RATE}/s offered over ${PACED_CONNECTIONS} connections; max: ${MAX_CONNECTIONS} connections`);
  const mcp = await startTrivialMcp();
  const jwks = await startJwks();
  const results: PhaseResult[] = [];
  try {
    // A B B A …: each variant as often early as late.
    for (const engine of ENGINES)
      for (const kind of RUN_KINDS)
        for (let round = 0; round < ROUNDS; round++)
          for (const variant of round % 2 === 0 ? variantsOf(engine) : [...variantsOf(engine)].reverse()) {
            console.log(`… ${engine}, ${variant.name}, runs: ${kind}, round ${round + 1}`);
            results.push(...(await session(engine, variant, kind, mcp, jwks)));
          }
  } finally {
    jwks.close();
    await mcp.close();
  }
  console.log();
  printTable(
    ["engine", "variant", "run", "phase", "offered", "202/s", "ack p50 ms", "ack p99 ms", "p99.9 ms", "timeouts", "runs done/s", "backlog start→end", "drain s"],
    results.map((r) => [
      r.engine,
      r.variant,
      r.run,
      r.phase,
      r.offered,
      r.ackPerSec.toFixed(0),
      r.p50.toFixed(1),
      r.p99.toFixed(1),
      r.p999.toFixed(1),
      String(r.timeouts),
      r.runsPerSec.toFixed(0),
      `${r.backlogStart}→${r.backlogEnd}`,
      r.drainSeconds !== undefined ? r.drainSeconds.toFixed(1) : r.queueOnly ? "-" : `>${DRAIN_TIMEOUT_MS / 1000}`,
    ]),
    [0, 1, 2, 3, 4],
  );
  console.log();
  for (const r of results.filter((x) => x.phase === "steady" && !x.queueOnly))
    console.log(
      `${r.engine}, ${r.variant}, runs ${r.run}: at ${RATE}/s offered, ${r.ackPerSec.toFixed(0)}/s acknowledged, ack p99 ${r.p99.toFixed(1)} ms ` +
        `(target < 50: ${r.p99 < 50 && r.timeouts === 0 ? "met" : "not met"}), ` +
        `backlog ${r.backlogStart}→${r.backlogEnd} (${r.backlogEnd - r.backlogStart <= RATE / 10 ? "not growing" : "growing"})`,
    );
  for (const r of results.filter((x) => x.engine === "postgres" && x.queueOnly))
    console.log(
      r.phase === "steady"
        ? `postgres ingest, ${r.variant}, runs ${r.run}: at ${RATE}/s offered, ack p99 ${r.p99.toFixed(1)} ms (target < 50: ${r.p99 < 50 && r.timeouts === 0 ? "met" : "not met"})`
        : `postgres ingest, ${r.variant}, runs ${r.run}: at full speed ${r.ackPerSec.toFixed(0)} events/s (target >= 2000: ${r.ackPerSec >= 2000 ? "met" : "not met"})`,
    );
  for (const r of results.filter((x) => x.phase === "max" && !x.queueOnly))
    console.log(
      `${r.engine}, ${r.variant}, runs ${r.run}: at full speed ${r.ackPerSec.toFixed(0)} events/s acknowledged, ${r.runsPerSec.toFixed(0)} runs/s completed ` +
        `(goal >= 2500 events/s sustained end to end: ${Math.min(r.ackPerSec, r.runsPerSec) >= 2500 ? "met" : "not met"})`,
    );
}

runBench(main);
