import { ExpressionSandbox } from "../integrations/expressions/sandbox.js";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Role } from "../../gen/platform/v1/common_pb.js";
import { buildApp, type App } from "../app.js";
import { loadConfig, loadQuotas, loadStoreConfig, type Config, type StoreConfig } from "../config.js";
import { DevIssuer } from "../integrations/identity/dev-issuer.js";
import { createAuthenticator, type Authenticator } from "../integrations/identity/index.js";
import { SecretBox } from "../lib/secret-box.js";
import type { Logger } from "pino";
import { createLogger } from "../log.js";
import { createPlatform, type Platform } from "../service/platform.js";
import { createOutboundFetch } from "../integrations/outbound/outbound.js";
import { createSkillPool } from "../integrations/skill-pool-factory.js";
import { WorkerThreads } from "../runtime/worker-threads.js";
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
// records without secrets, so a throwaway key is fine here.
async function operatorPlatform() {
  const store = await openStore();
  const deny: Authenticator = { authenticate: () => Promise.reject(new Error("not used by the CLI")) };
  return {
    store,
    platform: createPlatform({
      store,
      secrets: new SecretBox(randomBytes(32)),
      authenticator: deny,
      skills: createSkillPool(createOutboundFetch()),
      sandbox: new ExpressionSandbox(),
      quotas: loadQuotas(),
    }),
  };
}

export async function migrate(): Promise<void> {
  const config = loadStoreConfig();
  await (await openStore(config)).close();
  console.log(`migrated ${storeLocation(storeOptions(config))}`);
}

export async function sourceCreate(tenant: string, name: string): Promise<void> {
  const { store, platform } = await operatorPlatform();
  try {
    const { webhookSource, token } = await platform.invokeAsOperator(
      "createWebhookSource",
      { $typeName: "platform.v1.CreateWebhookSourceRequest", webhookSource: { $typeName: "platform.v1.WebhookSource", id: "", tenant, name } },
      tenant,
    );
    console.log(`created webhook source ${webhookSource?.name} (${webhookSource?.id}) in ${tenant}`);
    console.log(`token (shown once, store it in a secrets manager): ${token}`);
  } finally {
    await store.close();
  }
}

export async function tenantCreate(slug: string, admin: string | undefined, displayName = ""): Promise<void> {
  const { store, platform } = await operatorPlatform();
  try {
    const { tenant } = await platform.invokeAsOperator("createTenant", { $typeName: "platform.v1.CreateTenantRequest", tenant: { $typeName: "platform.v1.Tenant", id: "", slug, displayName } });
    console.log(`created tenant ${tenant?.slug} (${tenant?.id})`);
    if (admin) await memberAdd(slug, admin, "admin", platform);
  } finally {
    await store.close();
  }
}

export async function memberAdd(tenant: string, subject: string, role: string, platform?: Platform): Promise<void> {
  if (role !== "admin" && role !== "viewer") throw new Error(`--role must be admin or viewer, got "${role}"`);
  if (!platform) {
    const operator = await operatorPlatform();
    try {
      return await memberAdd(tenant, subject, role, operator.platform);
    } finally {
      await operator.store.close();
    }
  }
  const { member } = await platform.invokeAsOperator(
    "addMember",
    { $typeName: "platform.v1.AddMemberRequest", member: { $typeName: "platform.v1.Member", id: "", tenant, subject, role: role === "admin" ? Role.ADMIN : Role.VIEWER } },
    tenant,
  );
  console.log(`added ${member?.subject} to ${tenant} as ${role}`);
}

// Where runs execute: worker threads (`AGENTPLANE_WORKER_THREADS`), this
// thread (0 threads), or another process (role api).
function execution(config: Config, logger: Logger, secretKey: string, report: (r: Parameters<App["countExpressions"]>[0]) => void) {
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
    onReport: report,
  });
  return { execution: threads };
}

async function serveWith(config: Config, logger: Logger, authenticator: Authenticator, secretKey: string, devIssuer?: DevIssuer) {
  const store = await openStore(config);
  // Reports arrive from the threads only once the app has started them.
  const app: App = await buildApp({
    store,
    secrets: SecretBox.fromBase64(secretKey),
    authenticator,
    logger,
    tenantClaim: config.tenantClaim,
    metricsToken: config.metricsToken,
    devIssuer,
    mcp: { publicUrl: config.publicUrl, authorizationServers: config.mcpAuthorizationServers },
    webhook: {
      maxBytes: config.webhookMaxBytes,
      ratePerSecond: config.webhookRatePerSecond,
      burst: config.webhookBurst,
      tenantInflightBytes: config.webhookTenantInflightBytes,
    },
    outbound: config.outbound,
    expressions: expressionOptions(config),
    quotas: config.quotas,
    jsonMaxDepth: config.jsonMaxDepth,
    retention: { days: config.retentionDays, batch: config.retentionBatch },
    http: config.http,
    surfaces: config.role === "worker" ? "health" : "all",
    ...execution(config, logger, secretKey, (report) => app.countExpressions(report)),
  });
  const { server } = app;
  await server.listen({ host: config.host, port: config.port });
  app.start();
  const shutdown = async (signal: string) => {
    logger.info({ signal }, "shutting down: finishing or releasing in-flight runs");
    await app.stop();
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
  await serveWith(config, logger, createAuthenticator(config.auth, { log: logger }), config.secretKey!);
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
  const { store } = await serveWith(config, createLogger(config.logLevel), issuer.authenticator(config.auth.clockToleranceSeconds), secretKey, issuer);
  if (!(await store.tenants.get("dev"))) {
    const platform = createPlatform({
      store,
      secrets,
      authenticator: issuer.authenticator(0),
      skills: createSkillPool(createOutboundFetch()),
      sandbox: new ExpressionSandbox(),
    });
    await platform.invokeAsOperator("createTenant", { $typeName: "platform.v1.CreateTenantRequest", tenant: { $typeName: "platform.v1.Tenant", id: "", slug: "dev", displayName: "Development" } });
    await platform.invokeAsOperator(
      "addMember",
      { $typeName: "platform.v1.AddMemberRequest", member: { $typeName: "platform.v1.Member", id: "", tenant: "dev", subject: issuer.clientId, role: Role.ADMIN } },
      "dev",
    );
  }
  const base = config.publicUrl;
  const tokenBody = JSON.stringify({
    client_id: issuer.clientId,
    client_secret: issuer.clientSecret,
    audience: issuer.audience,
    grant_type: "client_credentials",
  });
  console.log(`
agentplane dev is listening on ${base} (data in ${config.dataDir})
dev client: ${issuer.clientId} / ${issuer.clientSecret}   tenant: dev (the client is its admin)

Get a token:
  TOKEN=$(curl -s -X POST ${base}/oauth/token -H 'content-type: application/json' -d '${tokenBody}' | node -pe 'JSON.parse(require("fs").readFileSync(0, "utf8")).access_token')

List agents (Connect, with buf curl):
  npx buf curl --schema proto --header "Authorization: Bearer $TOKEN" --header "X-Platform-Tenant: dev" --data '{}' ${base}/platform.v1.PlatformService/ListAgents

The same over REST:
  curl -s -H "Authorization: Bearer $TOKEN" -H "X-Platform-Tenant: dev" ${base}/api/v1/agents
`);
}
