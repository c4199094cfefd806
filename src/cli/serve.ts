// `serve` and `dev`: the HTTP app and where its runs execute.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { buildApp, type App } from "../app.js";
import { loadConfig, type Config } from "../config.js";
import { DevIssuer } from "../integrations/identity/dev-issuer.js";
import { CONSOLE_CLIENT_ID, DEV_USER } from "../integrations/identity/dev-login.js";
import { createAuthenticator, type Authenticator } from "../integrations/identity/index.js";
import { SecretBox } from "../lib/secret-box.js";
import { createLogger, lineWriter, prettyDestination } from "../log.js";
import { createMetrics, type Metrics } from "../metrics.js";
import { WorkerThreads } from "../runtime/worker-threads.js";
import { ensureDevTenant } from "./dev-tenant.js";
import { ensureDevWebhookSource } from "./dev-webhook-source.js";
import { expressionOptions, runtimeOptions } from "./runtime-settings.js";
import { openStore } from "./store.js";
import { startTracing } from "./tracing.js";
import type { ThreadData } from "./worker-thread.js";

// Where runs execute: worker threads (`AGENTPLANE_WORKER_THREADS`), this
// thread (0 threads), or another process (role api).
function execution(config: Config, logger: Logger, secretKey: string) {
  if (config.role === "api") {
    logger.info("role api: runs are queued here and executed by worker processes");
    return {};
  }
  if (config.workerThreads === 0) {
    logger.info({ role: config.role }, "runs execute on the HTTP thread");
    return { runtime: runtimeOptions(config, true) };
  }
  logger.info({ role: config.role }, `runs execute in ${config.workerThreads} worker threads`);
  const threads = new WorkerThreads({
    entry: new URL("./worker-thread.js", import.meta.url),
    threads: config.workerThreads,
    // One scheduler per process: thread 0's.
    data: (index): ThreadData => ({ config, secretKey, index, scheduler: index === 0 }),
    log: logger,
    writeLog: lineWriter(logger),
  });
  return { execution: threads };
}

async function serveWith(config: Config, logger: Logger, metrics: Metrics, authenticator: Authenticator, secretKey: string, devIssuer?: DevIssuer) {
  const tracing = await startTracing(config.tracing, logger);
  if (tracing) logger.info("traces are exported over OTLP (OTEL_* variables)");
  const store = await openStore(config);
  const app: App = await buildApp({
    store,
    secrets: SecretBox.fromBase64(secretKey),
    authenticator,
    logger,
    tenantClaim: config.tenantClaim,
    metricsToken: config.metricsToken,
    accessLog: config.accessLog,
    devIssuer,
    mcp: { publicUrl: config.publicUrl, authorizationServers: config.mcpAuthorizationServers },
    publicUrl: config.publicUrl,
    webhook: {
      maxBytes: config.webhookMaxBytes,
      ratePerSecond: config.webhookRatePerSecond,
      burst: config.webhookBurst,
      tenantInflightBytes: config.webhookTenantInflightBytes,
      signedBodyTimeoutMs: config.webhookSignedBodyTimeoutMs,
    },
    outbound: config.outbound,
    expressions: expressionOptions(config),
    quotas: config.quotas,
    jsonMaxDepth: config.jsonMaxDepth,
    scheduleMinIntervalSeconds: config.scheduleMinIntervalSeconds,
    retention: { days: config.retentionDays, batch: config.retentionBatch },
    http: config.http,
    console: config.console,
    streams: config.streams,
    surfaces: config.role === "worker" ? "health" : "all",
    metrics,
    ...execution(config, logger, secretKey),
  });
  const { server } = app;
  await server.listen({ host: config.host, port: config.port });
  app.start();
  const shutdown = async (signal: string) => {
    logger.info({ signal }, "shutting down: finishing or releasing in-flight runs");
    await app.stop();
    await tracing?.shutdown();
    await store.close();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
  return { store, app };
}

export async function serve(role?: string): Promise<void> {
  const config = loadConfig(process.env, { role });
  if (config.auth.mode === "dev") throw new Error("unreachable: serve never runs the dev issuer");
  const logger = createLogger(config.logLevel);
  // Before the authenticator, which reports to it.
  const metrics = createMetrics({ tenantLabel: config.metricsTenantLabel });
  const authenticator = createAuthenticator(config.auth, { log: logger, mcpResource: `${config.publicUrl}/mcp`, observer: metrics.observer });
  await serveWith(config, logger, metrics, authenticator, config.secretKey!);
}

// The dev secret key is generated once and kept in the data dir, so sealed
// secrets stay readable across restarts.
function devSecretKey(dataDir: string): string {
  const file = join(dataDir, "secret.key");
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, randomBytes(32).toString("base64"), { mode: 0o600 });
  }
  return readFileSync(file, "utf8").trim();
}

export async function dev(): Promise<void> {
  const config = loadConfig(process.env, { dev: true, role: "all" });
  if (config.auth.mode !== "dev") throw new Error("unreachable");
  const issuer = await DevIssuer.load(config.dataDir, config.publicUrl, config.auth.audience);
  const secretKey = config.secretKey ?? devSecretKey(config.dataDir);
  // Read by a person at a terminal; JSON when piped, as `serve` always is.
  const logger = createLogger(config.logLevel, process.stdout.isTTY ? await prettyDestination() : undefined);
  const metrics = createMetrics({ tenantLabel: config.metricsTenantLabel });
  // The app's own platform makes the dev tenant and source: one sandbox,
  // one skill pool, the service's key.
  const { store, app } = await serveWith(config, logger, metrics, issuer.authenticator(config.auth.clockToleranceSeconds), secretKey, issuer);
  const { platform } = app;
  await ensureDevTenant(store, platform, [issuer.clientId, DEV_USER]);
  const source = await ensureDevWebhookSource(store, platform, config.dataDir);
  const base = config.publicUrl;
  const tokenBody = JSON.stringify({
    client_id: issuer.clientId,
    client_secret: issuer.clientSecret,
    audience: issuer.audience,
    grant_type: "client_credentials",
  });
  const event = JSON.stringify({ event_type: "dev.hello", payload: { hello: "world" } });
  const allow = config.outbound.allow.join(", ") || "nothing";
  console.log(`
agentplane dev is listening on ${base} (data in ${config.dataDir})
The guide's examples (docs/guide) use this address; in each terminal you run them from:
  export AGENTPLANE_URL=${base}
dev client: ${issuer.clientId} / ${issuer.clientSecret}   tenant: dev (the client is its admin)
outbound: ${allow} allowed, so MCP servers on this machine work as skills (serve allows none unless AGENTPLANE_OUTBOUND_ALLOW says)

Get a token, then call the REST API (Connect: npx buf curl --schema proto ... ${base}/platform.v1.PlatformService/ListAgents):
  TOKEN=$(curl -s -X POST ${base}/oauth/token -H 'content-type: application/json' -d '${tokenBody}' | node -pe 'JSON.parse(require("fs").readFileSync(0, "utf8")).access_token')
  curl -s -H "Authorization: Bearer $TOKEN" -H "X-Platform-Tenant: dev" ${base}/api/v1/agents

Send an event to webhook source "dev" (${source.id}):
  curl -s -X POST ${base}/webhooks/events -H 'content-type: application/json' -H 'X-Webhook-Token: ${source.token}' -d '${event}'

Sign in as ${DEV_USER} (admin of tenant dev) with authorization code + PKCE, no token to paste:
  console:     ${base}/console (public client ${CONSOLE_CLIENT_ID})
  MCP clients: ${base}/mcp?tenant=dev (Streamable HTTP), e.g. npx @modelcontextprotocol/inspector;
               the client registers itself and opens a sign-in page with one button
Guide: docs/guide/README.md
`);
}
