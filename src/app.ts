import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { DevIssuer } from "./integrations/identity/dev-issuer.js";
import type { Authenticator } from "./integrations/identity/index.js";
import type { SecretBox } from "./lib/secret-box.js";
import { createMetrics, type Metrics } from "./metrics.js";
import { DEFAULT_QUOTAS, type Quotas } from "./service/limits.js";
import { createPlatform, type Platform } from "./service/platform.js";
import type { StreamLimits } from "./service/streams.js";
import type { Store } from "./store/store.js";
import { connectSurface } from "./surfaces/connect/connect.js";
import { consoleSurface, type ConsoleSettings } from "./surfaces/console/console.js";
import { projectRoot } from "./lib/project-root.js";
import { join } from "node:path";
import { devIssuerSurface } from "./surfaces/dev-issuer/dev-issuer.js";
import { h2cServerFactory } from "./surfaces/http/h2c-server.js";
import { nameSpansByRoute, tracedServerFactory } from "./surfaces/http/request-spans.js";
import { clientErrorHandler, DEFAULT_HTTP_LIMITS, type HttpLimits } from "./surfaces/http/http-limits.js";
import { healthSurface } from "./surfaces/http/health.js";
import { mcpSurface } from "./surfaces/mcp/mcp.js";
import { notFound } from "./surfaces/http/not-found.js";
import { VERSION } from "./version.js";
import { createOutboundFetch, DEFAULT_OUTBOUND, type OutboundOptions } from "./integrations/outbound/outbound.js";
import { createSkillPool } from "./integrations/skill-pool-factory.js";
import type { SkillPool } from "./integrations/mcp-client/skill-pool.js";
import { restSurface } from "./surfaces/rest/rest.js";
import { DEFAULT_SIGNED_BODY_TIMEOUT_MS, DEFAULT_TENANT_INFLIGHT_BYTES } from "./surfaces/webhooks/inflight-bytes.js";
import { webhookSurface } from "./surfaces/webhooks/webhooks.js";
import type { Scheduler } from "./runtime/scheduler.js";
import type { Worker } from "./runtime/worker.js";
import { buildRuntime, type Execution, type Runtime, type RuntimeOptions } from "./runtime/runtime.js";
import { OverviewSealer } from "./runtime/overview-sealer.js";
import { DEFAULT_RETENTION, Retention } from "./runtime/retention.js";
import { ExpressionSandbox, type Mode, type SandboxOptions } from "./integrations/expressions/sandbox.js";
import type { ExpressionUse } from "./lib/observer.js";
import type { FilterPolicy } from "./service/event-matching.js";
import { LogThrottle } from "./lib/log-throttle.js";
import { TenantSlugs } from "./service/tenant-slugs.js";
import { accessLog } from "./surfaces/http/access-log.js";

export { DEFAULT_STEP_BUDGET_MS, type RuntimeOptions } from "./runtime/runtime.js";

export interface AppOptions {
  store: Store;
  secrets: SecretBox;
  authenticator: Authenticator;
  logger: Logger;
  tenantClaim?: string;
  metricsToken?: string;
  devIssuer?: DevIssuer;
  // `tenantInflightBytes`: body bytes one tenant may have in flight (default
  // DEFAULT_TENANT_INFLIGHT_BYTES); `signedBodyTimeoutMs`: time a signed
  // delivery's body has to arrive (default DEFAULT_SIGNED_BODY_TIMEOUT_MS).
  webhook?: { maxBytes: number; ratePerSecond: number; burst: number; tenantInflightBytes?: number; signedBodyTimeoutMs?: number };
  // Executes runs on this thread (tests; `AGENTPLANE_WORKER_THREADS=0`).
  runtime?: RuntimeOptions;
  // Executes runs elsewhere in this process (worker threads). With neither,
  // runs are queued for other processes.
  execution?: Execution;
  // "health": only /healthz, /readyz and /metrics (a `worker` process).
  surfaces?: "all" | "health";
  mcp?: { publicUrl: string; authorizationServers: string[] };
  // Where the service is reached from outside (signed webhook sources'
  // URLs); the MCP public URL unless set.
  publicUrl?: string;
  outbound?: OutboundOptions;
  // Per-tenant caps; defaults from service/limits.ts.
  quotas?: Quotas;
  // Deepest nesting of a webhook payload or run input.
  jsonMaxDepth?: number;
  // Shortest interval between two slots of a schedule trigger.
  scheduleMinIntervalSeconds?: number;
  http?: HttpLimits;
  // Bounds of the Watch… streams; defaults from service/streams.ts.
  streams?: Partial<StreamLimits>;
  expressions?: ExpressionOptions;
  // Days and batch size of retention (runtime/retention.ts).
  retention?: { days: number; batch: number; intervalMs?: number };
  // The service's clock (rate limits, idempotency windows); tests inject one.
  now?: () => number;
  // The browser console's login settings (GET /console/config.json); unset,
  // the console says how to configure them.
  console?: ConsoleSettings;
  // One line per request (surfaces/http/access-log.ts); on unless false.
  accessLog?: boolean;
  // Built by the caller when something made before the app reports to it
  // (the authenticator); a fresh one without a tenant label otherwise.
  metrics?: Metrics;
}

// Where and how tenant-authored JSONata runs (trigger filters, step arguments).
export interface ExpressionOptions {
  sandbox?: Partial<Omit<SandboxOptions, "onOverrun" | "onPlaced">>;
  filter?: Partial<FilterPolicy>;
  stepBudgetMs?: number;
  // How often a trigger's filter failures are logged, at most (a minute).
  warnEveryMs?: number;
}

export interface App {
  server: FastifyInstance;
  platform: Platform;
  skills: SkillPool;
  worker?: Worker;
  scheduler?: Scheduler;
  // Starts the worker and scheduler (after listen).
  start(): void;
  // Stops accepting, finishes or releases in-flight runs; the store stays open.
  stop(graceMs?: number): Promise<void>;
}

// One Fastify server, one port: every surface is an encapsulated plugin over
// the same platform implementation.
export async function buildApp(options: AppOptions): Promise<App> {
  const limits = options.http ?? DEFAULT_HTTP_LIMITS;
  const server = Fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    serverFactory: tracedServerFactory(h2cServerFactory(limits)),
    clientErrorHandler: clientErrorHandler(limits),
    // REST and MCP bodies; Connect reads its own (`readMaxBytes`), webhooks
    // set theirs.
    bodyLimit: limits.maxBodyBytes,
    // Fastify's two lines per request (with headers) are replaced by the
    // access log's one, without them.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
  });
  const log = options.logger;
  // One guard for everything the service fetches on a tenant's behalf.
  const outbound = options.outbound ?? DEFAULT_OUTBOUND;
  const guardedFetch = createOutboundFetch(outbound);
  const metrics = options.metrics ?? createMetrics();
  const { observer } = metrics;
  const skills = createSkillPool(guardedFetch, outbound, observer);
  const use = (mode: Mode): ExpressionUse => (mode === "value" ? "step" : mode);
  const sandbox = new ExpressionSandbox({
    ...options.expressions?.sandbox,
    onOverrun: (mode, reason) => observer.expressionOverrun(use(mode), reason),
    onPlaced: (mode, where) => observer.expressionPlaced(use(mode), where),
  });
  // One warning per trigger per minute, not one per event, on the service's clock.
  const filterWarnings = new LogThrottle(options.expressions?.warnEveryMs ?? 60_000, undefined, options.now);
  let execution: Execution | undefined = options.execution;
  const platform = createPlatform({
    ...options,
    publicUrl: options.publicUrl ?? options.mcp?.publicUrl,
    skills,
    webhookRate: options.webhook && { perSecond: options.webhook.ratePerSecond, burst: options.webhook.burst },
    onRunsQueued: (via, runs) => {
      execution?.wake();
      // Debug: at info the access line of the request and each run's
      // "run started" already say it, and ingest may be thousands a second.
      if (log.isLevelEnabled("debug"))
        for (const run of runs)
          log.debug({ tenant: run.tenantId, run: run.id, agent: run.agentId, trigger: run.triggerId ?? undefined, event: run.eventId ?? undefined, via }, "run queued");
    },
    onRunCancelled: (id) => execution?.cancel(id),
    sandbox,
    filterPolicy: options.expressions?.filter,
    stepBudgetMs: options.expressions?.stepBudgetMs,
    onFilterFailure: (trigger, reason, message) => {
      metrics.filterFailures.inc({ reason });
      const held = filterWarnings.admit(trigger.id);
      if (held === undefined) return;
      log.warn(
        { tenant: trigger.tenantId, trigger: trigger.id, agent: trigger.agentId, reason, error: message.slice(0, 500) || undefined, suppressed: held },
        reason === "suspended"
          ? "trigger filter suspended after repeated overruns; events do not match it"
          : "trigger filter failed; the event does not match it",
      );
    },
  });
  let runtime: Runtime | undefined;
  if (options.runtime) {
    runtime = buildRuntime({
      ...options.runtime,
      store: options.store,
      secrets: options.secrets,
      log,
      tools: { fetch: guardedFetch, skills, sandbox },
      stepBudgetMs: options.expressions?.stepBudgetMs,
      maxQueuedRuns: (options.quotas ?? DEFAULT_QUOTAS).queuedRuns,
      observer,
    });
    execution = runtime;
  }
  // Both on the service's clock, the one rows and buckets are stamped by:
  // on another, retention would delete a bucket in use (refilling it).
  const clock = options.now && { now: options.now };
  const retention = new Retention({ store: options.store.retention, log, ...clock, ...(options.retention ?? DEFAULT_RETENTION) });
  // Beside retention, in every process: the overview's rollups (store/overview.ts).
  const sealer = new OverviewSealer({ store: options.store.overview, log, ...clock });
  if (options.accessLog ?? true) {
    const slugs = new TenantSlugs(options.store.tenants);
    accessLog(server, { log, slugOf: (id) => slugs.peek(id) });
  }
  metrics.instrument(server);
  nameSpansByRoute(server);
  server.setNotFoundHandler(notFound);
  metrics.openStreams(() => platform.openStreams());
  metrics.readStore(options.store);
  const snapshots = execution?.metricSnapshots?.bind(execution);
  if (snapshots) metrics.fromThreads(snapshots);

  await server.register(healthSurface, { storeAnswers: () => options.store.ping(), exposition: metrics.exposition, metricsToken: options.metricsToken });
  const api = (options.surfaces ?? "all") === "all";
  if (api) {
    await server.register(connectSurface, { platform, readMaxBytes: limits.maxBodyBytes });
    await server.register(restSurface, { platform, version: VERSION });
    await server.register(mcpSurface, {
      platform,
      publicUrl: options.mcp?.publicUrl ?? "http://localhost",
      authorizationServers: options.mcp?.authorizationServers ?? [],
      version: VERSION,
    });
    await server.register(webhookSurface, {
      ingestion: platform.webhooks,
      deliveries: platform.deliveries,
      maxBytes: options.webhook?.maxBytes ?? 1024 * 1024,
      tenantInflightBytes: options.webhook?.tenantInflightBytes ?? DEFAULT_TENANT_INFLIGHT_BYTES,
      signedBodyTimeoutMs: options.webhook?.signedBodyTimeoutMs ?? DEFAULT_SIGNED_BODY_TIMEOUT_MS,
      observer,
    });
    if (options.devIssuer) await server.register(devIssuerSurface, { issuer: options.devIssuer });
    await server.register(consoleSurface, {
      settings: options.console ?? { issuer: "", clientId: "", audience: "", scopes: "" },
      dir: join(projectRoot(), "dist", "console"),
    });
  }
  return {
    server,
    platform,
    skills,
    worker: runtime?.worker,
    scheduler: runtime?.scheduler,
    start() {
      // Trigger filters (API) and step arguments (a runtime here) evaluate in it.
      if (api || runtime) sandbox.warm();
      execution?.start();
      retention.start();
      sealer.start();
    },
    async stop(graceMs) {
      await retention.stop();
      await sealer.stop();
      // Open streams end first (OK; clients reconnect elsewhere): the close
      // waits for every response in flight.
      platform.closeStreams();
      await server.close();
      await execution?.stop(graceMs);
      await skills.close();
      await sandbox.close();
    },
  };
}
