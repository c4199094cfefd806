// The built `agentplane serve` as a child process, for the benches that
// measure the real server (e2e, soak): a local JWKS and the token it signs,
// the child with a bench's settings, and the runs it left in its database.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import postgres from "postgres";
import { ownChild } from "./run.js";

export const CLI = fileURLToPath(new URL("../../bin/agentplane.js", import.meta.url));
export const ISSUER = "https://idp.bench.test";
export const AUDIENCE = "https://agentplane.bench.test";
// The admin of tenant `bench` (`agentplane tenant create bench --admin SUBJECT`).
export const SUBJECT = "bench";

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function startJwks() {
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

// A PlatformService call (Connect JSON) in `tenant` (default `bench`) on the service at `url`.
export async function platformCall<T>(url: string, token: string, method: string, body: unknown, tenant = "bench"): Promise<T> {
  const res = await fetch(`${url}/platform.v1.PlatformService/${method}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "x-platform-tenant": tenant, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

export class Service {
  readonly child: ChildProcess;
  readonly url: string;
  readonly exited: Promise<number | null>;
  output = "";

  // `env`: the bench's own settings (threads, role, …) over the common ones.
  // `nodeArgs`: node options of the bench's own before BENCH_NODE_ARGS.
  constructor(readonly dir: string, port: number, jwksUrl: string, env: Record<string, string>, databaseUrl: string | undefined, nodeArgs: string[] = []) {
    this.url = `http://127.0.0.1:${port}`;
    // e.g. BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to see where the service's threads spend their time.
    const args = [...nodeArgs, ...(process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean)];
    this.child = ownChild(spawn(process.execPath, [...args, CLI, "serve"], {
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
        ...env,
        // More service settings to compare, e.g. {"AGENTPLANE_SQLITE_SYNCHRONOUS":"NORMAL"}.
        ...(JSON.parse(process.env.BENCH_SERVICE_ENV ?? "{}") as Record<string, string>),
      },
      stdio: ["ignore", "pipe", "pipe"],
    }));
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

  call<T>(token: string, method: string, body: unknown, tenant?: string): Promise<T> {
    return platformCall<T>(this.url, token, method, body, tenant);
  }

  async stop(): Promise<void> {
    this.child.kill("SIGTERM");
    const code = await this.exited;
    if (code !== 0) throw new Error(`agentplane serve exited with ${code}:\n${this.output}`);
  }
}

export interface Counts {
  backlog: number;
  done: number;
  failed: number;
}

export interface Counter {
  counts(): Promise<Counts>;
  close(): Promise<void>;
}

const tally = (rows: { status: string; n: number }[]): Counts => {
  const by = Object.fromEntries(rows.map((r) => [r.status, r.n]));
  return { backlog: (by.queued ?? 0) + (by.running ?? 0), done: by.succeeded ?? 0, failed: (by.failed ?? 0) + (by.timed_out ?? 0) };
};

// Runs by status, read from the database as the service leaves it.
export function counter(dir: string, databaseUrl: string | undefined): Counter {
  const query = "select status, count(*)::int as n from runs group by status";
  if (databaseUrl !== undefined) {
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    return { counts: async () => tally(await sql.unsafe<{ status: string; n: number }[]>(query)), close: () => sql.end() };
  }
  // Off this thread: see count-thread.ts.
  const thread = new Worker(new URL("./count-thread.js", import.meta.url), { workerData: join(dir, "agentplane.db") });
  const waiting = new Map<number, { resolve(rows: { status: string; n: number }[]): void; reject(error: unknown): void }>();
  let next = 0;
  // Set once the thread is gone: a count asked of it then would never be answered.
  let failed: unknown;
  thread.on("message", ({ id, rows }: { id: number; rows: { status: string; n: number }[] }) => {
    waiting.get(id)?.resolve(rows);
    waiting.delete(id);
  });
  thread.on("error", (error) => {
    failed = error;
    for (const w of waiting.values()) w.reject(error);
    waiting.clear();
  });
  return {
    counts: () =>
      new Promise<{ status: string; n: number }[]>((resolve, reject) => {
        if (failed !== undefined) return reject(failed);
        waiting.set(++next, { resolve, reject });
        thread.postMessage(next);
      }).then(tally),
    close: async () => void (await thread.terminate()),
  };
}

// The API refuses an agent with nothing to run; the "empty" runs measure the
// pipeline around a run, so the bench empties a saved plan in the database
// (the executor still runs such a row: zero steps, success).
export async function emptyPlan(dir: string, databaseUrl: string | undefined, agentId: string): Promise<void> {
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
export async function drain(count: Counter, timeoutMs: number): Promise<number | undefined> {
  const started = Date.now();
  while ((await count.counts()).backlog > 0) {
    if (Date.now() - started > timeoutMs) return undefined;
    await sleep(100);
  }
  return (Date.now() - started) / 1000;
}
