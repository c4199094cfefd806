// Starts the real agentplane server (every surface, real store, real
// authenticator) on a loopback port for end-to-end tests.
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freeLoopbackPort } from "./listen.js";
import { Role } from "../../gen/platform/v1/common_pb.js";
import { buildApp, type App, type AppOptions, type RuntimeOptions } from "../../src/app.js";
import { noopExecutor } from "../../src/runtime/executor.js";
import { DEFAULT_OUTBOUND } from "../../src/integrations/outbound/outbound.js";
import { DEFAULT_HTTP_LIMITS, type HttpLimits } from "../../src/surfaces/http/http-limits.js";
import type { Authenticator } from "../../src/integrations/identity/index.js";
import { DevIssuer } from "../../src/integrations/identity/dev-issuer.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import { createLogger } from "../../src/log.js";
import type { Logger } from "pino";
import { createPostgresStore } from "../../src/store/postgres/store.js";
import { createSqliteStore } from "../../src/store/sqlite/store.js";
import type { Store } from "../../src/store/store.js";
import { createTestDatabase } from "./postgres.js";

export interface TestServer {
  url: string;
  port: number;
  app: App;
  store: Store;
  dir: string;
  // With `devIssuer: true`: the embedded issuer of `agentplane dev`.
  devIssuer?: DevIssuer;
  // The PostgreSQL database, with `store: "postgres"`.
  databaseUrl?: string;
  // Creates a tenant and its members through the service (operator authority).
  seedTenant(slug: string, members?: { subject: string; role: "admin" | "viewer" }[]): Promise<string>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  // Unset only with `devIssuer`, whose tokens are then the ones accepted.
  authenticator?: Authenticator;
  // Mounts the dev issuer of `agentplane dev` at the server's URL (issuer,
  // audience and the MCP authorization server), keeping its files in `dir`.
  devIssuer?: boolean;
  // "postgres": the app on a fresh PostgreSQL database of its own (dropped
  // on close); SQLite in the temp dir otherwise.
  store?: "sqlite" | "postgres";
  tenantClaim?: string;
  metricsToken?: string;
  webhook?: AppOptions["webhook"];
  // Starts workers with these settings: the no-op executor unless given, or
  // `executor: "agents"` for the real agent runtime.
  runtime?: Partial<Omit<RuntimeOptions, "executor">> & { executor?: RuntimeOptions["executor"] | "agents" };
  groupCommit?: { windowMs: number; maxBatch: number };
  mcpAuthorizationServers?: string[];
  // CIDRs customer MCP servers may be at (loopback for the test fixtures).
  outboundAllow?: string[];
  expressions?: AppOptions["expressions"];
  quotas?: AppOptions["quotas"];
  jsonMaxDepth?: number;
  // The service's clock, for rate limits and windows a test steps through.
  now?: () => number;
  scheduleMinIntervalSeconds?: number;
  retention?: AppOptions["retention"];
  // Small limits make the HTTP limit tests fast; unset ones keep the defaults.
  http?: Partial<HttpLimits>;
  // Listen here (from freeLoopbackPort) when something must know the URL
  // before the server starts, e.g. an identity provider's redirect URI.
  port?: number;
  // The console's login settings (GET /console/config.json).
  console?: AppOptions["console"];
  // Another server's directory, to open its database as a second process
  // would (the directory stays until its own server closes).
  dir?: string;
  // Another server's PostgreSQL database (its `databaseUrl`), as a replica
  // would open it (it stays until its own server closes).
  databaseUrl?: string;
  streams?: AppOptions["streams"];
  // Where the app logs (a logger over a capturing stream); silent unless
  // TEST_LOG_LEVEL says otherwise.
  logger?: Logger;
  // false: no access log line per request (`AGENTPLANE_ACCESS_LOG=off`).
  accessLog?: boolean;
  // Metrics built by the test (to hand their observer to its authenticator).
  metrics?: AppOptions["metrics"];
  // The key secrets are sealed with (a new one unless given): two servers on
  // one database share it, as two processes with one AGENTPLANE_SECRET_KEY.
  secrets?: SecretBox;
}

export async function startServer(options: TestServerOptions): Promise<TestServer> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "agentplane-test-"));
  // The URL is known before the app is built: the MCP metadata names it.
  const port = options.port ?? (await freeLoopbackPort());
  const url = `http://127.0.0.1:${port}`;
  const database = options.store === "postgres" && !options.databaseUrl ? await createTestDatabase() : undefined;
  const databaseUrl = options.databaseUrl ?? database?.url;
  const store = databaseUrl
    ? await createPostgresStore({ url: databaseUrl, poolSize: 5, groupCommit: options.groupCommit })
    : createSqliteStore({ path: join(dir, "agentplane.db"), groupCommit: options.groupCommit });
  const devIssuer = options.devIssuer ? await DevIssuer.load(dir, url, url) : undefined;
  const authenticator = options.authenticator ?? devIssuer?.authenticator(60);
  if (!authenticator) throw new Error("startServer needs an authenticator or devIssuer");
  const app = await buildApp({
    store,
    secrets: options.secrets ?? new SecretBox(randomBytes(32)),
    authenticator,
    devIssuer,
    logger: options.logger ?? createLogger(process.env.TEST_LOG_LEVEL ?? "silent"),
    accessLog: options.accessLog,
    tenantClaim: options.tenantClaim,
    metricsToken: options.metricsToken,
    webhook: options.webhook,
    outbound: { ...DEFAULT_OUTBOUND, allow: options.outboundAllow ?? [] },
    expressions: options.expressions,
    quotas: options.quotas,
    jsonMaxDepth: options.jsonMaxDepth,
    now: options.now,
    retention: options.retention,
    scheduleMinIntervalSeconds: options.scheduleMinIntervalSeconds,
    http: { ...DEFAULT_HTTP_LIMITS, ...options.http },
    console: options.console,
    streams: options.streams,
    metrics: options.metrics,
    mcp: { publicUrl: url, authorizationServers: options.mcpAuthorizationServers ?? (devIssuer ? [url] : []) },
    runtime: options.runtime && {
      concurrency: 4,
      leaseMs: 30_000,
      maxAttempts: 3,
      scheduler: false,
      ...options.runtime,
      executor: options.runtime.executor === "agents" ? undefined : (options.runtime.executor ?? noopExecutor),
    },
  });
  await app.server.listen({ host: "127.0.0.1", port });
  app.start();
  return {
    url,
    port,
    app,
    store,
    dir,
    devIssuer,
    databaseUrl,
    async seedTenant(slug, members = []) {
      const { tenant } = await app.platform.invokeAsOperator("createTenant", {
        $typeName: "platform.v1.CreateTenantRequest",
        tenant: { $typeName: "platform.v1.Tenant", id: "", slug, displayName: slug },
      });
      for (const m of members)
        await app.platform.invokeAsOperator(
          "addMember",
          {
            $typeName: "platform.v1.AddMemberRequest",
            member: { $typeName: "platform.v1.Member", id: "", tenant: slug, subject: m.subject, role: m.role === "admin" ? Role.ADMIN : Role.VIEWER },
          },
          slug,
        );
      if (!tenant?.id) throw new Error(`tenant ${slug} was not created`);
      return tenant.id;
    },
    async close() {
      await app.stop(1000);
      await store.close();
      await database?.drop();
      if (!options.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

// Resolves once the server's store has signalled a change to webhook sources
// (what its caches of them wait for).
export const sourcesChanged = (s: { store: Store }) =>
  new Promise<void>((resolve) => {
    const stop = s.store.signals.onChanged((table) => {
      if (table !== undefined && table !== "webhook_sources") return;
      stop();
      resolve();
    });
  });

// A Connect JSON unary call over plain fetch: what a curl user sees.
export async function connectCall(
  server: { url: string },
  method: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${server.url}/platform.v1.PlatformService/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
}

// The same call when the test needs it to succeed: the answer's body, or an
// error naming the method, status and body.
export async function connectMust(
  server: { url: string },
  method: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const res = await connectCall(server, method, body, headers);
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

// Rows of a server's SQLite file, read as another process would (read-only).
export function sqliteRows<T = Record<string, unknown>>(server: { dir: string }, sql: string, ...params: unknown[]): T[] {
  const db = new Database(join(server.dir, "agentplane.db"), { readonly: true });
  try {
    return db.prepare(sql).all(...params) as T[];
  } finally {
    db.close();
  }
}

export const bearer = (token: string, tenant?: string): Record<string, string> => ({
  authorization: `Bearer ${token}`,
  ...(tenant ? { "x-platform-tenant": tenant } : {}),
});
