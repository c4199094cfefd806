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
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import autocannon, { type Result } from "autocannon";
import Database from "better-sqlite3";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import postgres from "postgres";
import { positiveInt } from "../lib/env.js";
import { describeHost, runBench } from "../lib/run.js";
import { printTable } from "../lib/table.js";
import { startTrivialMcp, type TrivialMcp } from "../lib/trivial-mcp.js";
import { freshDatabase } from "../lib/postgres.js";

const exec = promisify(execFile);
const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const ISSUER = "https://idp.bench.test";
const AUDIENCE = "https://agentplane.bench.test";
const SUBJECT = "bench";
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

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

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

async function startJwks() {
  const { privateKey, publicKey } = await generateKeyPair("RS256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "bench", alg: "RS256", use: "sig" };
  const server = createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] })));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const token = await new SignJWT({ scope: "platform:read platform:write" })
    .setProtectedHeader({ alg: "RS256", kid: "bench", typ: "at+jwt" })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setSubject(SUBJECT)
    .setIssuedAt()
    .setExpirationTime("2h")
    .sign(privateKey);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`, token, close: () => server.close() };
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

class Service {
  readonly child: ChildProcess;
  readonly url: string;
  readonly exited: Promise<number | null>;
  output = "";

  constructor(readonly dir: string, port: number, jwksUrl: string, variant: Variant, databaseUrl: string | undefined) {
    this.url = `http://127.0.0.1:${port}`;
    // e.g. BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to see where the service's threads spend their time.
    const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean);
    this.child = spawn(process.execPath, [...nodeArgs, CLI, "serve"], {
      env: {
        PATH: process.env.PATH ?? "",
        AGENTPLANE_DATA_DIR: dir,
        ...(databaseUrl !== undefined && { AGENTPLANE_DATABASE_URL: databaseUrl }),
        AGENTPLANE_HOST: "127.0.0.1",
        AGENTPLANE_PORT: String(port),
        AGENTPLANE_AUTH_MODE: "jwt",
        AGENTPLANE_JWT_ISSUER: ISSUER,
        AGENTPLANE_JWT_AUDIENCE: AUDIENCE,
        AGENTPLANE_JWKS_URL: jwksUrl,
        AGENTPLANE_SECRET_KEY: Buffer.alloc(32, 1).toString("base64"),
        AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8",
        AGENTPLANE_LOG_LEVEL: "warn",
        AGENTPLANE_WEBHOOK_RATE_PER_SECOND: "1000000000",
        AGENTPLANE_WEBHOOK_BURST: "1000000000",
        AGENTPLANE_QUOTA_QUEUED_RUNS: "100000000",
        ...(variant.threads !== undefined && { AGENTPLANE_WORKER_THREADS: variant.threads }),
        ...(variant.queueOnly && { AGENTPLANE_ROLE: "api" }),
        // More service settings to compare, e.g. {"AGENTPLANE_SQLITE_SYNCHRONOUS":"NORMAL"}.
        ...(JSON.parse(process.env.BENCH_SERVICE_ENV ?? "{}") as Record<string, string>),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString("utf8")).slice(-20_000);
    };
    this.child.stdout!.on("data", keep);
    this.child.stderr!.on("data", keep);
    this.exited = new Promise((resolve) => this.child.once("exit", resolve));
  }

  async ready(): Promise<void> {
    const deadline = Date.now() + 30_000;
    let exited = false;
    void this.exited.then(() => (exited = true));
    for (;;) {
      if (exited) throw new Error(`agentplane serve exited:\n${this.output}`);
      const ok = await fetch(`${this.url}/readyz`).then(
        async (r) => (await r.arrayBuffer(), r.status === 200),
        () => false,
      );
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`agentplane serve not ready after 30 s:\n${this.output}`);
      await sleep(100);
    }
  }

  async call<T>(token: string, method: string, body: unknown): Promise<T> {
    const res = await fetch(`${this.url}/platform.v1.PlatformService/${method}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "x-platform-tenant": "bench", "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${method}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }

  async stop(): Promise<void> {
    this.child.kill("SIGTERM");
    const code = await this.exited;
    if (code !== 0) throw new Error(`agentplane serve exited with ${code}:\n${this.output}`);
  }
}

interface Counts {
  backlog: number;
  done: number;
  failed: number;
}

interface Counter {
  counts(): Promise<Counts>;
  close(): Promise<void>;
}

const tally = (rows: { status: string; n: number }[]): Counts => {
  const by = Object.fromEntries(rows.map((r) => [r.status, r.n]));
  return { backlog: (by.queued ?? 0) + (by.running ?? 0), done: by.succeeded ?? 0, failed: (by.failed ?? 0) + (by.timed_out ?? 0) };
};

// Runs by status, read from the database as the service leaves it.
function counter(dir: string, databaseUrl: string | undefined): Counter {
  const query = "select status, count(*)::int as n from runs group by status";
  if (databaseUrl !== undefined) {
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    return { counts: async () => tally(await sql.unsafe<{ status: string; n: number }[]>(query)), close: () => sql.end() };
  }
  const db = new Database(join(dir, "agentplane.db"), { readonly: true, fileMustExist: true });
  const stmt = db.prepare<[], { status: string; n: number }>(query.replace("::int", ""));
  return { counts: async () => tally(stmt.all()), close: async () => void db.close() };
}


// The API refuses an agent with nothing to run; the "empty" runs measure the
// pipeline around a run, so the bench empties a saved plan in the database
// (the executor still runs such a row: zero steps, success).
async function emptyPlan(dir: string, databaseUrl: string | undefined, agentId: string): Promise<void> {
  if (databaseUrl !== undefined) {
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    await sql`update agents set spec = jsonb_set(spec, '{steps}', '[]'::jsonb) where id = ${agentId}`;
    await sql.end();
    return;
  }
  const db = new Database(join(dir, "agentplane.db"));
  db.prepare("update agents set spec = json_set(spec, '$.steps', json('[]')) where id = ?").run(agentId);
  db.close();
}

// Seconds until no run is queued or running; undefined past the timeout.
async function drain(count: Counter, timeoutMs: number): Promise<number | undefined> {
  const started = Date.now();
  while ((await count.counts()).backlog > 0) {
    if (Date.now() - started > timeoutMs) return undefined;
    await sleep(100);
  }
  return (Date.now() - started) / 1000;
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
  const dir = mkdtempSync(join(tmpdir(), "agentplane-bench-e2e-"));
  const db = engine === "postgres" ? await freshDatabase() : undefined;
  const services: Service[] = [];
  try {
    await exec(process.execPath, [CLI, "tenant", "create", "bench", "--admin", SUBJECT], {
      env: { PATH: process.env.PATH ?? "", AGENTPLANE_DATA_DIR: dir, ...(db && { AGENTPLANE_DATABASE_URL: db.url }) },
    });
    // One after another: the first has migrated when the next starts.
    for (let i = 0; i < (variant.replicas ?? 1); i++) {
      const s = new Service(dir, await freePort(), jwks.url, variant, db?.url);
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
    rmSync(dir, { recursive: true, force: true });
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
