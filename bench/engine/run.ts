// The run engine under an open-loop paced load, agentplane `serve` with its
// defaults on each engine (BENCH_ENGINES) and graphile-worker beside it on the
// same PostgreSQL, in one run:
//   paced: BENCH_RATE events/s for BENCH_SECONDS, 1 KiB events each with its
//     own idempotency key, one trigger whose agent has an empty plan (the
//     engine alone): acknowledged/s, ack p50/p99 from each request's scheduled
//     time, runs completed/s during the load, runs queued at its end;
//   sweep: runs completed/s at rising offered rates (BENCH_SWEEP), each for
//     BENCH_SWEEP_SECONDS after the backlog of the last drained: past
//     capacity the rate must level off, not collapse;
//   drain: a backlog of each of BENCH_BACKLOGS runs queued by a `--role api`
//     process, then drained by a `serve` started on it: runs/s;
//   start: event → run start (runs.start_time − events.receive_time) at
//     200 events/s, p50/p99;
//   BENCH_PLAN=step keeps the agent's one tool call instead of an empty plan:
//     the issue's one-step runs, with the runs still queued 5 s after the
//     paced load; the tool on a trivial MCP server in this process, or with
//     BENCH_MCP=hello the guide's hello-mcp (the MCP SDK's server, its own
//     process; lib/mcp-servers.ts);
//   graphile-worker: a Fastify process adding one job per POST (addJob) with
//     its runner at the same concurrency, paced as agentplane is (BENCH_PEER=0
//     leaves it out, for quick runs comparing agentplane with itself).
// BENCH_WINDOW_SECONDS=N prints each N seconds of the paced phase as they end.
// The generator's own CPU is printed with each paced phase. It reports; it
// fails only when a request is refused or a run fails.
import { execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import postgres from "postgres";
import { nonNegativeInt, positiveInt } from "../lib/env.js";
import { latencyPercentile, pacedLoad, type PacedWindow } from "../lib/paced.js";
import { freshDatabase } from "../lib/postgres.js";
import { describeHost, ownChild, removeScratchDir, runBench, scratchDir } from "../lib/run.js";
import { CLI, counter, drain, emptyPlan, freePort, Service, sleep, startJwks, SUBJECT, type Counter } from "../lib/serve.js";
import { percentile } from "../lib/stats.js";
import { printTable } from "../lib/table.js";
import { MCP_NAMES, mcpKind, startMcpServer, type McpServerProcess } from "../lib/mcp-servers.js";

const exec = promisify(execFile);
const PEER = fileURLToPath(new URL("./graphile-peer.js", import.meta.url));
const NOTE = "x".repeat(900);
const body = (n: number) => JSON.stringify({ event_type: "order.created", payload: { order: n, note: NOTE } });

const RATE = positiveInt("BENCH_RATE", 2500);
const SECONDS = positiveInt("BENCH_SECONDS", 60);
const SWEEP = (process.env.BENCH_SWEEP ?? "1000,2500,4000,6000").split(",").map(Number);
const SWEEP_SECONDS = positiveInt("BENCH_SWEEP_SECONDS", 10);
const BACKLOGS = (process.env.BENCH_BACKLOGS ?? "1000,50000").split(",").map(Number);
const START_RATE = 200;
const SOCKETS = positiveInt("BENCH_SOCKETS", 256);
const WINDOW_SECONDS = nonNegativeInt("BENCH_WINDOW_SECONDS", 0);
const DRAIN_MS = positiveInt("BENCH_DRAIN_SECONDS", 120) * 1000;
// graphile-worker's concurrency; agentplane's is its own default.
const PEER_CONCURRENCY = positiveInt("BENCH_PEER_CONCURRENCY", 32);
const WITH_PEER = process.env.BENCH_PEER !== "0";
const PLAN = process.env.BENCH_PLAN ?? "empty";
if (PLAN !== "empty" && PLAN !== "step") throw new Error(`BENCH_PLAN: "empty" or "step", got "${PLAN}"`);
const MCP = mcpKind("BENCH_MCP", "trivial");
const ENGINES = (process.env.BENCH_ENGINES ?? "postgres,sqlite").split(",").map((e) => e.trim());
for (const e of ENGINES) if (e !== "sqlite" && e !== "postgres") throw new Error(`BENCH_ENGINES: "sqlite" and/or "postgres", got "${e}"`);

interface Target {
  url: string;
  headers: Record<string, string>;
}

interface Paced {
  offered: number;
  acked: number;
  refused: number;
  p50: number;
  p99: number;
  generatorCpu: number;
}

// An open-loop paced load; every answer but 202 counts as refused. With
// BENCH_WINDOW_SECONDS, each window's answers and ack p50/p99 are printed as
// it ends, with `during(window)`'s words (PostgreSQL's checkpoints in it):
// where in a phase its tail came from.
async function paced(target: Target, rate: number, seconds: number, keyPrefix: string, during?: () => Promise<string>): Promise<Paced> {
  const load = pacedLoad({
    url: target.url,
    headers: { "content-type": "application/json", ...target.headers },
    headersOf: (n) => ({ "idempotency-key": `${keyPrefix}-${n}` }),
    body,
    rate,
    seconds,
    sockets: SOCKETS,
  });
  const windows: PacedWindow[] = [];
  const report = async () => {
    const w = load.window();
    windows.push(w);
    const extra = during ? `, ${await during()}` : "";
    console.log(`    ${keyPrefix} window ${windows.length}: ${w.answered} answered, ack p50 ${latencyPercentile(w, 50).toFixed(1)} ms, p99 ${latencyPercentile(w, 99).toFixed(1)} ms${extra}`);
  };
  // One report at a time, the last (the phase's rest) before `during`'s sources close.
  let reporting = Promise.resolve();
  const every = WINDOW_SECONDS && during ? setInterval(() => (reporting = reporting.then(report)), WINDOW_SECONDS * 1000) : undefined;
  await load.done;
  clearInterval(every);
  await reporting;
  if (every) await report();
  else windows.push(load.window());
  const w = mergeWindows(windows);
  const { cpuMs, wallMs } = load.cpu();
  const acked = w.statuses["202"] ?? 0;
  // Over the time until the last answer: past `seconds` when acks lag.
  return { offered: rate, acked: acked / (wallMs / 1000), refused: w.answered - acked + w.errors, p50: latencyPercentile(w, 50), p99: latencyPercentile(w, 99), generatorCpu: cpuMs / wallMs };
}

function mergeWindows(windows: PacedWindow[]): PacedWindow {
  const all: PacedWindow = { sent: 0, answered: 0, latencies: [], statuses: {}, errors: 0 };
  for (const w of windows) {
    all.sent += w.sent;
    all.answered += w.answered;
    all.errors += w.errors;
    for (const l of w.latencies) all.latencies.push(l);
    for (const [code, n] of Object.entries(w.statuses)) all.statuses[code] = (all.statuses[code] ?? 0) + n;
  }
  return all;
}

// What the service's HTTP thread went through since the last call, from its
// /metrics: the event loop's longest delay (prom-client resets it at each
// scrape) and the time its garbage collections took.
async function serviceLoop(url: string): Promise<() => Promise<string>> {
  const read = async () => {
    const text = await (await fetch(`${url}/metrics`)).text();
    const lag = Number(/^agentplane_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)?.[1] ?? NaN);
    let gc = 0;
    for (const m of text.matchAll(/^agentplane_nodejs_gc_duration_seconds_sum\{[^}]*\} (\S+)$/gm)) gc += Number(m[1]);
    return { lag, gc };
  };
  let last = await read();
  return async () => {
    const now = await read();
    const words = `HTTP thread: loop delay max ${(now.lag * 1000).toFixed(0)} ms, GC ${((now.gc - last.gc) * 1000).toFixed(0)} ms`;
    last = now;
    return words;
  };
}

// PostgreSQL's checkpoints started since the last call (the server's
// counters, so another database's load counts too).
async function checkpointsSince(url: string): Promise<{ read(): Promise<string>; close(): Promise<void> }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const counts = async () =>
    (await sql<{ timed: number; req: number }[]>`select checkpoints_timed::int as timed, checkpoints_req::int as req from pg_stat_bgwriter`)[0]!;
  let last = await counts();
  return {
    async read() {
      const now = await counts();
      const words = `checkpoints started: ${now.timed - last.timed} timed, ${now.req - last.req} requested`;
      last = now;
      return words;
    },
    close: () => sql.end(),
  };
}

interface Session {
  dir: string;
  db?: { url: string; drop(): Promise<void> };
  count: Counter;
  close(): Promise<void>;
}

async function session(engine: string): Promise<Session> {
  const dir = scratchDir("agentplane-bench-engine-");
  const db = engine === "postgres" ? await freshDatabase() : undefined;
  await exec(process.execPath, [CLI, "tenant", "create", "bench", "--admin", SUBJECT], {
    env: { PATH: process.env.PATH ?? "", AGENTPLANE_DATA_DIR: dir, ...(db && { AGENTPLANE_DATABASE_URL: db.url }) },
  });
  let count: Counter | undefined;
  return {
    dir,
    db,
    get count() {
      // Opened on first use: the SQLite file exists once `serve` migrated it.
      return (count ??= counter(dir, db?.url));
    },
    async close() {
      await count?.close();
      await db?.drop();
      removeScratchDir(dir);
    },
  };
}

// The tenant's agent (an empty plan), its trigger and source; the source's webhook URL headers.
async function provision(s: Session, service: Service, token: string, mcp: McpServerProcess): Promise<string> {
  const { skill } = await service.call<{ skill: { id: string } }>(token, "CreateSkill", { skill: { name: mcp.kind, mcpUrl: mcp.url } });
  const { agent } = await service.call<{ agent: { id: string } }>(token, "CreateAgent", {
    agent: { name: "empty", skillIds: [skill.id], steps: [{ skillId: skill.id, tool: mcp.tool.name, arguments: mcp.tool.arguments }] },
  });
  if (PLAN === "empty") await emptyPlan(s.dir, s.db?.url, agent.id);
  await service.call(token, "CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*" } } });
  const created = await service.call<{ token: string }>(token, "CreateWebhookSource", { webhookSource: { name: "bench" } });
  return created.token;
}

const webhook = (service: Service, token: string): Target => ({ url: `${service.url}/webhooks/events`, headers: { "x-webhook-token": token } });

async function start(s: Session, jwksUrl: string, env: Record<string, string> = {}): Promise<Service> {
  const service = new Service(s.dir, await freePort(), jwksUrl, env, s.db?.url);
  await service.ready();
  return service;
}

interface EngineResult {
  engine: string;
  paced?: Paced & { runsPerSec: number; queuedEnd: number; queuedAfter5s: number };
  sweep: { offered: number; acked: number; runsPerSec: number; queuedEnd: number }[];
  drains: { backlog: number; runsPerSec: number }[];
  start?: { p50: number; p99: number; n: number };
}

// Event → run start of the runs whose events came at or after `since`.
async function startLatencies(s: Session, since: number): Promise<number[]> {
  const query = "select r.start_time - e.receive_time as ms from runs r join events e on e.id = r.event_id where e.receive_time >= $1 and r.start_time is not null";
  if (s.db) {
    const sql = postgres(s.db.url, { max: 1, onnotice: () => {} });
    const rows = await sql.unsafe<{ ms: string }[]>(query, [since]);
    await sql.end();
    return rows.map((r) => Number(r.ms));
  }
  const db = new Database(join(s.dir, "agentplane.db"), { readonly: true });
  const rows = db.prepare(query.replace("$1", "?")).all(since) as { ms: number }[];
  db.close();
  return rows.map((r) => r.ms);
}

async function engineRun(engine: string, jwks: { url: string; token: string }, mcp: McpServerProcess): Promise<EngineResult> {
  const result: EngineResult = { engine, sweep: [], drains: [] };
  const s = await session(engine);
  try {
    const service = await start(s, jwks.url);
    try {
      const url = webhook(service, await provision(s, service, jwks.token, mcp));
      // Warm-up at half the rate, drained.
      await paced(url, Math.ceil(RATE / 2), 3, "warm");
      await drain(s.count, DRAIN_MS);

      const since = Date.now();
      const startPhase = await paced(url, START_RATE, 10, "start");
      if (startPhase.refused) throw new Error(`start phase: ${startPhase.refused} refused`);
      await drain(s.count, DRAIN_MS);
      const lat = await startLatencies(s, since);
      result.start = { p50: percentile(lat, 50), p99: percentile(lat, 99), n: lat.length };

      console.log(`… ${engine}: paced ${RATE}/s for ${SECONDS} s`);
      const before = await s.count.counts();
      const t0 = performance.now();
      const loop = WINDOW_SECONDS ? await serviceLoop(service.url) : undefined;
      const checkpoints = WINDOW_SECONDS && s.db ? await checkpointsSince(s.db.url) : undefined;
      const during = loop && (async () => [await loop(), await checkpoints?.read()].filter(Boolean).join(", "));
      const p = await paced(url, RATE, SECONDS, "paced", during);
      await checkpoints?.close();
      const after = await s.count.counts();
      if (after.failed) throw new Error(`${after.failed} runs failed:\n${service.output}`);
      // Over the time until the last answer, which is past SECONDS when acks lag.
      const runsPerSec = (after.done - before.done) / ((performance.now() - t0) / 1000);
      await sleep(5_000);
      result.paced = { ...p, runsPerSec, queuedEnd: after.backlog, queuedAfter5s: (await s.count.counts()).backlog };
      await drain(s.count, DRAIN_MS);

      for (const rate of SWEEP) {
        console.log(`… ${engine}: sweep ${rate}/s`);
        const b = await s.count.counts();
        const t0 = performance.now();
        const q = await paced(url, rate, SWEEP_SECONDS, `sweep-${rate}`);
        const a = await s.count.counts();
        result.sweep.push({ offered: rate, acked: q.acked, runsPerSec: (a.done - b.done) / ((performance.now() - t0) / 1000), queuedEnd: a.backlog });
        await drain(s.count, DRAIN_MS);
      }
      await service.stop();
    } finally {
      service.child.kill("SIGKILL");
    }
  } finally {
    await s.close();
  }

  for (const backlog of BACKLOGS) {
    console.log(`… ${engine}: drain ${backlog}`);
    const d = await session(engine);
    try {
      const api = await start(d, jwks.url, { AGENTPLANE_ROLE: "api" });
      try {
        const url = webhook(api, await provision(d, api, jwks.token, mcp));
        const q = await paced(url, Math.min(4000, backlog), backlog / Math.min(4000, backlog), `drain-${backlog}`);
        if (q.refused) throw new Error(`drain ingest: ${q.refused} refused`);
        await api.stop();
      } finally {
        api.child.kill("SIGKILL");
      }
      const queued = (await d.count.counts()).backlog;
      if (queued !== backlog) throw new Error(`drain: ${queued} queued, expected ${backlog}`);
      const worker = await start(d, jwks.url);
      try {
        const first = await d.count.counts();
        const t0 = performance.now();
        const seconds = await drain(d.count, DRAIN_MS);
        if (seconds === undefined) throw new Error(`drain of ${backlog} took over ${DRAIN_MS / 1000} s`);
        result.drains.push({ backlog, runsPerSec: (backlog - first.done) / ((performance.now() - t0) / 1000) });
        await worker.stop();
      } finally {
        worker.child.kill("SIGKILL");
      }
    } finally {
      await d.close();
    }
  }
  return result;
}

interface PeerResult {
  paced: Paced & { jobsPerSec: number; queuedEnd: number };
  concurrency: number;
  localQueue: number;
}

async function peer(): Promise<PeerResult> {
  const db = await freshDatabase();
  const port = await freePort();
  const localQueue = PEER_CONCURRENCY * 2;
  const child = ownChild(spawn(process.execPath, [PEER], {
    env: {
      PATH: process.env.PATH ?? "",
      PEER_DATABASE_URL: db.url,
      PEER_PORT: String(port),
      PEER_CONCURRENCY: String(PEER_CONCURRENCY),
      PEER_LOCAL_QUEUE: String(localQueue),
      PEER_COMPLETE_BATCH_MS: "0",
    },
    stdio: ["ignore", "pipe", "inherit"],
  }));
  try {
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on("data", (c: Buffer) => c.toString().includes("ready") && resolve());
      child.once("exit", (code) => reject(new Error(`graphile peer exited with ${code}`)));
    });
    const base = `http://127.0.0.1:${port}`;
    const target: Target = { url: `${base}/events`, headers: {} };
    const stats = async () => (await (await fetch(`${base}/stats`)).json()) as { added: number; completed: number };
    const settle = async () => {
      const deadline = Date.now() + DRAIN_MS;
      for (let st = await stats(); st.completed < st.added; st = await stats()) {
        if (Date.now() > deadline) throw new Error("graphile-worker did not drain");
        await sleep(100);
      }
    };
    await paced(target, Math.ceil(RATE / 2), 3, "warm");
    await settle();
    console.log(`… graphile-worker: paced ${RATE}/s for ${SECONDS} s`);
    const before = await stats();
    const t0 = performance.now();
    const p = await paced(target, RATE, SECONDS, "paced");
    const after = await stats();
    const seconds = (performance.now() - t0) / 1000;
    await settle();
    return { paced: { ...p, jobsPerSec: (after.completed - before.completed) / seconds, queuedEnd: after.added - after.completed }, concurrency: PEER_CONCURRENCY, localQueue };
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    await db.drop();
  }
}

const f0 = (n: number) => n.toFixed(0);
const f1 = (n: number) => n.toFixed(1);
const pct = (n: number) => `${(n * 100).toFixed(0)} %`;

async function main(): Promise<void> {
  console.log(`the run engine: ${[...ENGINES, ...(WITH_PEER ? ["graphile-worker"] : [])].join(", ")} on one PostgreSQL; ${describeHost()}`);
  console.log(`paced ${RATE}/s for ${SECONDS} s; sweep ${SWEEP.join(", ")}/s for ${SWEEP_SECONDS} s each; drains of ${BACKLOGS.join(", ")} runs; start latency at ${START_RATE}/s`);
  const mcp = await startMcpServer(MCP);
  const jwks = await startJwks();
  const results: EngineResult[] = [];
  let graphile: PeerResult | undefined;
  try {
    for (const engine of ENGINES) results.push(await engineRun(engine, jwks, mcp));
    if (ENGINES.includes("postgres") && WITH_PEER) graphile = await peer();
  } finally {
    jwks.close();
    await mcp.stop();
  }
  console.log();
  console.log(`paced ${RATE} events/s for ${SECONDS} s (agentplane: ${PLAN === "empty" ? "empty plans" : `one tool call a run on ${MCP_NAMES[MCP]}`}, its default concurrency${graphile ? `; graphile-worker: concurrency ${PEER_CONCURRENCY}, local queue ${graphile.localQueue}, completeJobBatchDelay 0` : ""})`);
  const pacedRows = results.filter((r) => r.paced).map((r) => [r.engine, f0(r.paced!.acked), String(r.paced!.refused), f1(r.paced!.p50), f1(r.paced!.p99), f0(r.paced!.runsPerSec), String(r.paced!.queuedEnd), pct(r.paced!.generatorCpu)]);
  if (graphile) pacedRows.push(["graphile-worker", f0(graphile.paced.acked), String(graphile.paced.refused), f1(graphile.paced.p50), f1(graphile.paced.p99), f0(graphile.paced.jobsPerSec), String(graphile.paced.queuedEnd), pct(graphile.paced.generatorCpu)]);
  printTable(["", "acked/s", "refused", "ack p50 ms", "ack p99 ms", "runs (jobs) done/s", "queued at end", "generator CPU"], pacedRows, [0]);
  console.log();
  console.log("offered load past capacity (runs done/s during the load)");
  printTable(
    ["engine", "offered/s", "acked/s", "runs done/s", "queued at end"],
    results.flatMap((r) => r.sweep.map((x) => [r.engine, String(x.offered), f0(x.acked), f0(x.runsPerSec), String(x.queuedEnd)])),
    [0],
  );
  console.log();
  console.log("draining a backlog queued by a `--role api` process");
  printTable(["engine", "backlog", "runs/s"], results.flatMap((r) => r.drains.map((d) => [r.engine, String(d.backlog), f0(d.runsPerSec)])), [0]);
  console.log();
  console.log(`event → run start at ${START_RATE}/s`);
  printTable(["engine", "runs", "p50 ms", "p99 ms"], results.filter((r) => r.start).map((r) => [r.engine, String(r.start!.n), f1(r.start!.p50), f1(r.start!.p99)]), [0]);
  console.log();
  for (const r of results) {
    if (r.paced)
      console.log(
        `${r.engine}: ack p99 ${f1(r.paced.p99)} ms (target < 50: ${r.paced.p99 < 50 && !r.paced.refused ? "met" : "not met"}); queued at the end ${r.paced.queuedEnd} ` +
          `(target < one second of work, ${f0(r.paced.runsPerSec)}: ${r.paced.queuedEnd < r.paced.runsPerSec ? "met" : "not met"}); ` +
          `${r.paced.queuedAfter5s} queued or running 5 s after the load`,
      );
    const small = r.drains.find((d) => d.backlog === Math.min(...BACKLOGS));
    const big = r.drains.find((d) => d.backlog === Math.max(...BACKLOGS));
    if (small && big && small !== big)
      console.log(
        `${r.engine}: drain of ${big.backlog} at ${f0(big.runsPerSec)} runs/s (target >= 3000: ${big.runsPerSec >= 3000 ? "met" : "not met"}), ` +
          `${f0((big.runsPerSec / small.runsPerSec) * 100)} % of the ${small.backlog}-run drain (target >= 80 %: ${big.runsPerSec >= 0.8 * small.runsPerSec ? "met" : "not met"})`,
      );
    if (r.start) console.log(`${r.engine}: event → run start p50 ${f1(r.start.p50)} ms (target < 5), p99 ${f1(r.start.p99)} ms (target < 25)`);
    const peak = Math.max(...r.sweep.map((x) => x.runsPerSec));
    const last = r.sweep.at(-1);
    if (last) console.log(`${r.engine}: at ${last.offered}/s offered ${f0(last.runsPerSec)} runs/s, ${f0((last.runsPerSec / peak) * 100)} % of the sweep's best (${f0(peak)})`);
  }
  const pg = results.find((r) => r.engine === "postgres")?.paced;
  if (pg && graphile) console.log(`postgres vs graphile-worker, end to end at ${RATE}/s: ${(pg.runsPerSec / graphile.paced.jobsPerSec).toFixed(2)}x its jobs/s (target >= 2x)`);
}

runBench(main);
