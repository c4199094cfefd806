import { create } from "@bufbuild/protobuf";
import { WebhookSourceKind, WebhookSourceSchema } from "../../gen/platform/v1/webhook_source_pb.js";
import { ExpressionSandbox } from "../integrations/expressions/sandbox.js";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Role } from "../../gen/platform/v1/common_pb.js";
import { buildApp, type App } from "../app.js";
import { loadConfig, loadOperatorSettings, loadQuotas, loadStoreConfig, type Config, type StoreConfig } from "../config.js";
import { DevIssuer } from "../integrations/identity/dev-issuer.js";
import { CONSOLE_CLIENT_ID, DEV_USER } from "../integrations/identity/dev-login.js";
import { ensureDevTenant } from "./dev-tenant.js";
import { ensureDevWebhookSource } from "./dev-webhook-source.js";
import { createAuthenticator, type Authenticator } from "../integrations/identity/index.js";
import { SecretBox } from "../lib/secret-box.js";
import type { Logger } from "pino";
import { createLogger, lineWriter, prettyDestination } from "../log.js";
import { createMetrics, type Metrics } from "../metrics.js";
import { createPlatform, type Platform } from "../service/platform.js";
import { invalidArgument } from "../service/errors.js";
import { newMemberFields } from "../service/members.js";
import { newTenantFields } from "../service/tenants.js";
import { newWebhookSourceFields } from "../service/webhook-sources.js";
import { isSlug } from "../service/validate.js";
import { createOutboundFetch } from "../integrations/outbound/outbound.js";
import { createSkillPool } from "../integrations/skill-pool-factory.js";
import { WorkerThreads } from "../runtime/worker-threads.js";
import { startTracing } from "./tracing.js";
import { expressionOptions, runtimeOptions } from "./runtime-settings.js";
import type { ThreadData } from "./worker-thread.js";

import { openStore as openConfiguredStore, storeLocation, type OpenStoreOptions } from "../store/open.js";

function storeOptions(config: StoreConfig): OpenStoreOptions {
  return {
    databaseUrl: config.databaseUrl,
    poolSize: config.databasePoolSize,
    sqlite: {
      path: config.sqlitePath,
      synchronous: config.sqliteSynchronous,
      groupCommit: { windowMs: config.ingestBatchWindowMs, maxBatch: config.ingestBatchMax },
    },
  };
}

export function openStore(config: StoreConfig = loadStoreConfig()) {
  return openConfiguredStore(storeOptions(config));
}

// Store commands run with the operator's authority; no key is needed for
// records without secrets, so a throwaway key is fine here. They say which
// database they use (a wrong AGENTPLANE_DATA_DIR is the usual "not found").
// `existing`: the command needs a tenant, so a SQLite file that is not there
// yet is refused rather than created empty.
// `sealing`: the service's own key and public URL, for a command that seals
// a secret the service must open later (or prints a URL of it).
async function operatorPlatform(existing?: { tenant: string }, sealing?: { secretKey: string; publicUrl: string }) {
  const config = loadStoreConfig();
  const options = storeOptions(config);
  console.error(`database ${storeLocation(options)}`);
  if (existing && config.databaseUrl === undefined && !existsSync(config.sqlitePath))
    throw new Error(`tenant "${existing.tenant}" not found: there is no database at ${config.sqlitePath} yet (agentplane tenant create makes it)`);
  const store = await openConfiguredStore(options);
  const deny: Authenticator = { authenticate: () => Promise.reject(new Error("not used by the CLI")) };
  return {
    store,
    platform: createPlatform({
      store,
      secrets: sealing ? SecretBox.fromBase64(sealing.secretKey) : new SecretBox(randomBytes(32)),
      publicUrl: sealing?.publicUrl,
      authenticator: deny,
      skills: createSkillPool(createOutboundFetch()),
      sandbox: new ExpressionSandbox(),
      quotas: loadQuotas(),
    }),
  };
}

// A tenant named on the command line; one that is not a slug cannot exist.
function checkTenantSlug(tenant: string): void {
  if (!isSlug(tenant)) throw invalidArgument("tenant", `"${tenant}" is not a tenant slug (^[a-z][a-z0-9-]{1,62}$)`);
}

export async function migrate(): Promise<void> {
  const config = loadStoreConfig();
  await (await openStore(config)).close();
  console.log(`migrated ${storeLocation(storeOptions(config))}`);
}

const KINDS: Record<string, WebhookSourceKind> = {
  envelope: WebhookSourceKind.ENVELOPE,
  standard_webhooks: WebhookSourceKind.STANDARD_WEBHOOKS,
  github: WebhookSourceKind.GITHUB,
  stripe: WebhookSourceKind.STRIPE,
};

export async function sourceCreate(tenant: string, name: string, kindName = "envelope", signingSecret = ""): Promise<void> {
  checkTenantSlug(tenant);
  const kind = KINDS[kindName];
  if (kind === undefined) throw invalidArgument("--kind", `must be ${Object.keys(KINDS).join(", ")}; got "${kindName}"`);
  newWebhookSourceFields({ name, kind });
  // A signed kind's secret is sealed with the service's key, and its URL is
  // the service's public one.
  let sealing: { secretKey: string; publicUrl: string } | undefined;
  if (kind !== WebhookSourceKind.ENVELOPE) {
    const { secretKey, publicUrl } = loadOperatorSettings();
    if (!secretKey)
      throw new Error("a signed source's secret is sealed with the service's key: set AGENTPLANE_SECRET_KEY as the service has it (agentplane dev keeps its own in the data directory)");
    sealing = { secretKey, publicUrl };
  }
  const { store, platform } = await operatorPlatform({ tenant }, sealing);
  try {
    const created = await platform.invokeAsOperator(
      "createWebhookSource",
      { $typeName: "platform.v1.CreateWebhookSourceRequest", webhookSource: create(WebhookSourceSchema, { name, kind, signingSecret }) },
      tenant,
    );
    const source = created.webhookSource;
    if (kind === WebhookSourceKind.ENVELOPE) {
      console.log(`created webhook source ${source?.name} (${source?.id}) in ${tenant}`);
      console.log(`token (shown once, store it in a secrets manager): ${created.token}`);
      return;
    }
    console.log(`created ${kindName} webhook source ${source?.name} (${source?.id}) in ${tenant}`);
    console.log(`url (the provider posts here; set AGENTPLANE_PUBLIC_URL if it is not the service's public address): ${source?.url}`);
    if (created.signingSecret) console.log(`signing secret (shown once, give it to the provider and keep it in a secrets manager): ${created.signingSecret}`);
    else console.log("signing secret: the one given, stored encrypted");
  } finally {
    await store.close();
  }
}

export async function tenantCreate(slug: string, admin: string | undefined, displayName = ""): Promise<void> {
  newTenantFields({ slug, displayName });
  if (admin !== undefined) newMemberFields({ subject: admin, role: Role.ADMIN });
  const { store, platform } = await operatorPlatform();
  try {
    const { tenant } = await platform.invokeAsOperator("createTenant", { $typeName: "platform.v1.CreateTenantRequest", tenant: { $typeName: "platform.v1.Tenant", id: "", slug, displayName } });
    console.log(`created tenant ${tenant?.slug} (${tenant?.id})`);
    if (admin !== undefined) await addMember(platform, slug, admin, Role.ADMIN);
  } finally {
    await store.close();
  }
}

export async function memberAdd(tenant: string, subject: string, roleName: string): Promise<void> {
  if (roleName !== "admin" && roleName !== "viewer") throw new Error(`--role must be admin or viewer, got "${roleName}"`);
  const role = roleName === "admin" ? Role.ADMIN : Role.VIEWER;
  checkTenantSlug(tenant);
  newMemberFields({ subject, role });
  const { store, platform } = await operatorPlatform({ tenant });
  try {
    await addMember(platform, tenant, subject, role);
  } finally {
    await store.close();
  }
}

async function addMember(platform: Platform, tenant: string, subject: string, role: Role): Promise<void> {
  const { member } = await platform.invokeAsOperator(
    "addMember",
    { $typeName: "platform.v1.AddMemberRequest", member: { $typeName: "platform.v1.Member", id: "", tenant, subject, role } },
    tenant,
  );
  console.log(`added ${member?.subject} to ${tenant} as ${role === Role.ADMIN ? "admin" : "viewer"}`);
}

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
  return { store, server };
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
  const secrets = SecretBox.fromBase64(secretKey);
  // Read by a person at a terminal; JSON when piped, as `serve` always is.
  const logger = createLogger(config.logLevel, process.stdout.isTTY ? await prettyDestination() : undefined);
  const metrics = createMetrics({ tenantLabel: config.metricsTenantLabel });
  const { store } = await serveWith(config, logger, metrics, issuer.authenticator(config.auth.clockToleranceSeconds), secretKey, issuer);
  const platform = createPlatform({
    store,
    secrets,
    authenticator: issuer.authenticator(0),
    skills: createSkillPool(createOutboundFetch()),
    sandbox: new ExpressionSandbox(),
  });
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
