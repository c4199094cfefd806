// A database crash under load: two `agentplane serve` replicas on a private
// PostgreSQL cluster (bench/lib/private-postgres.ts, never the shared server)
// take paced webhooks whose runs call a trivial MCP tool; the postmaster is
// stopped in immediate mode (`pg_ctl stop -m immediate`: every connection
// cut, no checkpoint, as on a crash) and started again BENCH_DOWN_SECONDS
// later. Each round reports what webhook senders saw (202 / 503 / other / no
// answer within BENCH_REQUEST_TIMEOUT_MS), how long after the database
// accepted connections again each replica's /readyz answered 200 and its
// first webhook 202, whether a runtime thread or a process died, and, once
// the runs drained, acknowledged events lost and runs not succeeded. The
// bench exits 1 on a lost acknowledged event, a dead process or thread, or a
// run that never finishes; the timings are reported, not enforced.
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import postgres from "postgres";
import { positiveInt } from "../lib/env.js";
import { startPrivatePostgres, type PrivatePostgres } from "../lib/private-postgres.js";
import { describeHost, ownChild, removeScratchDir, runBench, scratchDir } from "../lib/run.js";
import { printTable } from "../lib/table.js";
import { AUDIENCE, CLI, freePort, ISSUER, platformCall, sleep, startJwks, SUBJECT } from "../lib/serve.js";
import { startTrivialMcp } from "../lib/trivial-mcp.js";

const exec = promisify(execFile);

const ROUNDS = positiveInt("BENCH_ROUNDS", 4);
const RATE = positiveInt("BENCH_RATE", 100);
const BEFORE_MS = positiveInt("BENCH_BEFORE_SECONDS", 3) * 1000;
const DOWN_MS = positiveInt("BENCH_DOWN_SECONDS", 4) * 1000;
const AFTER_MS = positiveInt("BENCH_AFTER_SECONDS", 8) * 1000;
const REQUEST_TIMEOUT_MS = positiveInt("BENCH_REQUEST_TIMEOUT_MS", 10_000);
const LEASE_SECONDS = positiveInt("BENCH_LEASE_SECONDS", 5);
const DRAIN_MS = positiveInt("BENCH_DRAIN_SECONDS", 60) * 1000;

class Replica {
  readonly child: ChildProcess;
  readonly url: string;
  exitCode: number | null | undefined;
  output = "";

  constructor(port: number, jwksUrl: string, databaseUrl: string) {
    this.url = `http://127.0.0.1:${port}`;
    this.child = ownChild(spawn(process.execPath, [CLI, "serve"], {
      env: {
        PATH: process.env.PATH ?? "",
        AGENTPLANE_DATABASE_URL: databaseUrl,
        AGENTPLANE_HOST: "127.0.0.1",
        AGENTPLANE_PORT: String(port),
        AGENTPLANE_AUTH_MODE: "jwt",
        AGENTPLANE_JWT_ISSUER: ISSUER,
        AGENTPLANE_JWT_AUDIENCE: AUDIENCE,
        AGENTPLANE_JWKS_URL: jwksUrl,
        AGENTPLANE_SECRET_KEY: Buffer.alloc(32, 1).toString("base64"),
        AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8",
        AGENTPLANE_LOG_LEVEL: "warn",
        AGENTPLANE_RUN_LEASE_SECONDS: String(LEASE_SECONDS),
        AGENTPLANE_WEBHOOK_RATE_PER_SECOND: "1000000000",
        AGENTPLANE_WEBHOOK_BURST: "1000000000",
        AGENTPLANE_QUOTA_QUEUED_RUNS: "100000000",
      },
      stdio: ["ignore", "pipe", "pipe"],
    }));
    const keep = (chunk: Buffer) => {
      this.output += chunk.toString("utf8");
    };
    this.child.stdout!.on("data", keep);
    this.child.stderr!.on("data", keep);
    this.child.once("exit", (code) => (this.exitCode = code));
  }

  async readyz(): Promise<number> {
    return fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).then(
      async (r) => (await r.arrayBuffer(), r.status),
      () => 0,
    );
  }

  async ready(): Promise<void> {
    const deadline = Date.now() + 30_000;
    while ((await this.readyz()) !== 200) {
      if (this.exitCode !== undefined) throw new Error(`agentplane serve exited:\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`agentplane serve not ready after 30 s:\n${this.output}`);
      await sleep(100);
    }
  }

  call<T>(token: string, method: string, body: unknown): Promise<T> {
    return platformCall<T>(this.url, token, method, body);
  }

  // Lines of this replica's log that match.
  count(pattern: RegExp): number {
    return this.output.split("\n").filter((line) => pattern.test(line)).length;
  }

  async stop(): Promise<void> {
    if (this.exitCode === undefined) this.child.kill("SIGTERM");
    await new Promise((resolve) => (this.exitCode !== undefined ? resolve(undefined) : this.child.once("exit", resolve)));
  }
}

interface Answer {
  replica: number;
  at: number;
  // 0: no answer (connection refused, reset, or timed out).
  status: number;
  eventId?: string;
}

interface ReplicaRound {
  first503?: number;
  readyAfterMs?: number;
  first202AfterMs?: number;
  s202: number;
  s503: number;
  other: number;
  none: number;
  threadDeaths: number;
  errorLines: number;
  exited: boolean;
}

interface RoundResult {
  replicas: ReplicaRound[];
  accepted: number;
  lost: number;
  notSucceeded: number;
  drainMs: number;
}

async function round(n: number, cluster: PrivatePostgres, replicas: Replica[], webhookToken: string, sql: postgres.Sql): Promise<RoundResult> {
  const answers: Answer[] = [];
  const marks = replicas.map(() => ({ threadDeaths: replicas[0]!.count(/runtime thread exited/), lines: 0 }));
  replicas.forEach((r, i) => {
    marks[i] = { threadDeaths: r.count(/runtime thread exited/), lines: r.output.split("\n").length };
  });
  let stop = false;
  let seq = 0;
  // Paced: one request every 1000/RATE ms, alternating replicas, never waiting for answers.
  const inflight = new Set<Promise<void>>();
  const sender = (async () => {
    const started = performance.now();
    for (let i = 0; !stop; i++) {
      const due = started + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const replica = i % replicas.length;
      const key = `r${n}-${++seq}`;
      const p = fetch(`${replicas[replica]!.url}/webhooks/events`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-webhook-token": webhookToken, "idempotency-key": key },
        body: JSON.stringify({ event_type: "order.created", payload: { key } }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      }).then(
        async (res) => {
          const body = (await res.json().catch(() => ({}))) as { event_id?: string };
          answers.push({ replica, at: performance.now(), status: res.status, eventId: res.status === 202 ? body.event_id : undefined });
        },
        () => void answers.push({ replica, at: performance.now(), status: 0 }),
      );
      inflight.add(p);
      void p.finally(() => inflight.delete(p));
    }
  })();
  // /readyz of every replica, every 50 ms.
  const ready: { at: number; status: number }[][] = replicas.map(() => []);
  const probing = Promise.all(
    replicas.map(async (r, i) => {
      while (!stop) {
        const status = await r.readyz();
        ready[i]!.push({ at: performance.now(), status });
        await sleep(50);
      }
    }),
  );

  await sleep(BEFORE_MS);
  const crashAt = performance.now();
  await cluster.crash();
  await sleep(DOWN_MS);
  await cluster.start();
  // pg_ctl -w returned: the database accepts connections again.
  const backAt = performance.now();
  await sleep(AFTER_MS);
  stop = true;
  await sender;
  await probing;
  await Promise.all(inflight);

  const accepted = answers.filter((a) => a.eventId !== undefined).map((a) => a.eventId!);
  const drainStarted = performance.now();
  let notSucceeded = accepted.length;
  let lost = accepted.length;
  while (performance.now() - drainStarted < DRAIN_MS) {
    const [row] = await sql<{ stored: number; succeeded: number }[]>`
      select count(distinct e.id)::int as stored, count(distinct r.event_id) filter (where r.status = 'succeeded')::int as succeeded
      from events e left join runs r on r.event_id = e.id
      where e.id = any(${accepted})`;
    lost = accepted.length - row!.stored;
    notSucceeded = accepted.length - row!.succeeded;
    if (notSucceeded === 0) break;
    await sleep(250);
  }
  const drainMs = performance.now() - drainStarted;
  if (notSucceeded) {
    const stuck = await sql<{ status: string; owner: string | null; attempt: number; n: number }[]>`
      select r.status, r.lease_owner as owner, r.attempt, count(*)::int as n from events e left join runs r on r.event_id = e.id
      where e.id = any(${accepted}) and r.status is distinct from 'succeeded' group by 1, 2, 3`;
    console.error(`round ${n}: runs not succeeded: ${JSON.stringify(stuck)}`);
  }

  return {
    accepted: accepted.length,
    lost,
    notSucceeded,
    drainMs,
    replicas: replicas.map((r, i) => {
      const mine = answers.filter((a) => a.replica === i);
      const firstDown = ready[i]!.find((p) => p.at > crashAt && p.status !== 200);
      const readyAgain = ready[i]!.find((p) => p.at > backAt && p.status === 200);
      const first202 = mine.filter((a) => a.at > backAt && a.status === 202).sort((a, b) => a.at - b.at)[0];
      const lines = r.output.split("\n").slice(marks[i]!.lines);
      return {
        first503: firstDown && firstDown.at - crashAt,
        readyAfterMs: readyAgain && readyAgain.at - backAt,
        first202AfterMs: first202 && first202.at - backAt,
        s202: mine.filter((a) => a.status === 202).length,
        s503: mine.filter((a) => a.status === 503).length,
        other: mine.filter((a) => a.status !== 202 && a.status !== 503 && a.status !== 0).length,
        none: mine.filter((a) => a.status === 0).length,
        threadDeaths: r.count(/runtime thread exited/) - marks[i]!.threadDeaths,
        errorLines: lines.filter((l) => /"level":(50|60)/.test(l)).length,
        exited: r.exitCode !== undefined,
      };
    }),
  };
}

const ms = (v: number | undefined) => (v === undefined ? "never" : String(Math.round(v)));

async function main(): Promise<void> {
  console.log(`outage bench: ${describeHost()}`);
  console.log(
    `2 replicas, PostgreSQL crashed (pg_ctl stop -m immediate) and started ${DOWN_MS / 1000} s later, ${RATE} webhooks/s paced, lease ${LEASE_SECONDS} s, ${ROUNDS} rounds\n`,
  );
  const cluster = await startPrivatePostgres();
  const jwks = await startJwks();
  const mcp = await startTrivialMcp();
  const dir = scratchDir("agentplane-bench-outage-");
  const replicas: Replica[] = [];
  const sql = postgres(cluster.url, { max: 1, onnotice: () => {} });
  let failed = false;
  try {
    await exec(process.execPath, [CLI, "tenant", "create", "bench", "--admin", SUBJECT], {
      env: { PATH: process.env.PATH ?? "", AGENTPLANE_DATABASE_URL: cluster.url },
    });
    for (let i = 0; i < 2; i++) {
      const r = new Replica(await freePort(), jwks.url, cluster.url);
      replicas.push(r);
      await r.ready();
    }
    const api = replicas[0]!;
    const { skill } = await api.call<{ skill: { id: string } }>(jwks.token, "CreateSkill", { skill: { name: "trivial", mcpUrl: mcp.url } });
    const { agent } = await api.call<{ agent: { id: string } }>(jwks.token, "CreateAgent", {
      agent: { name: "outage", skillIds: [skill.id], steps: [{ skillId: skill.id, tool: "ok", arguments: "" }] },
    });
    await api.call(jwks.token, "CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*" } } });
    const { token } = await api.call<{ token: string }>(jwks.token, "CreateWebhookSource", { webhookSource: { name: "bench" } });
    await sleep(1000);

    const rows: string[][] = [];
    const totals: string[] = [];
    for (let n = 1; n <= ROUNDS; n++) {
      const result = await round(n, cluster, replicas, token, sql);
      result.replicas.forEach((r, i) =>
        rows.push([
          String(n),
          String(i),
          ms(r.first503),
          ms(r.readyAfterMs),
          ms(r.first202AfterMs),
          String(r.s202),
          String(r.s503),
          String(r.other),
          String(r.none),
          String(r.threadDeaths),
          String(r.errorLines),
          r.exited ? "yes" : "no",
        ]),
      );
      totals.push(`round ${n}: ${result.accepted} events acknowledged, ${result.lost} lost, ${result.notSucceeded} without a succeeded run after ${Math.round(result.drainMs)} ms`);
      if (result.lost || result.notSucceeded || result.replicas.some((r) => r.exited || r.threadDeaths)) failed = true;
      if (result.replicas.some((r) => r.exited)) break;
    }
    printTable(
      ["round", "replica", "503 after crash (ms)", "ready after db back (ms)", "first 202 after db back (ms)", "202", "503", "other", "no answer", "thread deaths", "error lines", "exited"],
      rows,
    );
    console.log("");
    for (const t of totals) console.log(t);
  } finally {
    await Promise.all(replicas.map((r) => r.stop()));
    await sql.end({ timeout: 1 });
    await mcp.close();
    jwks.close();
    await cluster.destroy();
    removeScratchDir(dir);
  }
  // BENCH_LOG_DIR=dir keeps each replica's whole log there.
  const logDir = process.env.BENCH_LOG_DIR;
  if (logDir) for (const [i, r] of replicas.entries()) writeFileSync(join(logDir, `replica-${i}.log`), r.output);
  if (failed) {
    for (const [i, r] of replicas.entries()) console.error(`\nreplica ${i} log (last 4 KB):\n${r.output.slice(-4000)}`);
    throw new Error("an acknowledged event was lost, a run never finished, or a process or thread died");
  }
}

runBench(main);
