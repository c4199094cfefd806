import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { DevIssuer } from "./integrations/identity/dev-issuer.js";
import type { Authenticator } from "./integrations/identity/index.js";
import type { SecretBox } from "./lib/secret-box.js";
import { createMetrics } from "./metrics.js";
import { DEFAULT_QUOTAS, type Quotas } from "./service/limits.js";
import { createPlatform, type Platform } from "./service/platform.js";
import type { Store } from "./store/store.js";
import { connectSurface } from "./surfaces/connect.js";
import { devIssuerSurface } from "./surfaces/dev-issuer.js";
import { h2cServerFactory } from "./surfaces/h2c-server.js";
import { clientErrorHandler, DEFAULT_HTTP_LIMITS, type HttpLimits } from "./surfaces/http-limits.js";
import { healthSurface } from "./surfaces/health.js";
import { mcpSurface } from "./surfaces/mcp.js";
import { VERSION } from "./version.js";
import { createOutboundFetch, DEFAULT_OUTBOUND, type OutboundOptions } from "./integrations/outbound/outbound.js";
import { createSkillPool } from "./integrations/skill-pool-factory.js";
import type { SkillPool } from "./integrations/mcp-client/skill-pool.js";
import { restSurface } from "./surfaces/rest.js";
import { DEFAULT_TENANT_INFLIGHT_BYTES } from "./surfaces/inflight-bytes.js";
import { webhookSurface } from "./surfaces/webhooks.js";
import type { Scheduler } from "./runtime/scheduler.js";
import type { Worker } from "./runtime/worker.js";
import { buildRuntime, type Execution, type Runtime, type RuntimeOptions } from "./runtime/runtime.js";
import type { FromThread } from "./runtime/worker-threads.js";
import { DEFAULT_RETENTION, Retention } from "./runtime/retention.js";
import { ExpressionSandbox, type SandboxOptions } from "./integrations/expressions/sandbox.js";
import type { FilterPolicy } from "./service/event-matching.js";

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
  // DEFAULT_TENANT_INFLIGHT_BYTES).
  webhook?: { maxBytes: number; ratePerSecond: number; burst: number; tenantInflightBytes?: number };
  // Executes runs on this thread (tests; `AGENTPLANE_WORKER_THREADS=0`).
  runtime?: RuntimeOptions;
  // Executes runs elsewhere in this process (worker threads). With neither,
  // runs are queued for other processes.
  execution?: Execution;
  // "health": only /healthz, /readyz and /metrics (a `worker` process).
  surfaces?: "all" | "health";
  mcp?: { publicUrl: string; authorizationServers: string[] };
  outbound?: OutboundOptions;
  // Per-tenant caps; defaults from service/limits.ts.
  quotas?: Quotas;
  // Deepest nesting of a webhook payload or run input.
  jsonMaxDepth?: number;
  http?: HttpLimits;
  expressions?: ExpressionOptions;
  // Days and batch size of retention (runtime/retention.ts).
  retention?: { days: number; batch: number };
}

// Where and how tenant-authored JSONata runs (trigger filters, step arguments).
export interface ExpressionOptions {
  sandbox?: Partial<Omit<SandboxOptions, "onOverrun" | "onPlaced">>;
  filter?: Partial<FilterPolicy>;
  stepBudgetMs?: number;
}

export interface App {
  server: FastifyInstance;
  platform: Platform;
  skills: SkillPool;
  worker?: Worker;
  scheduler?: Scheduler;
  // Counts what runtime threads report of their expression evaluations.
  countExpressions(report: Extract<FromThread, { type: "expressions" }>): void;
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
    serverFactory: h2cServerFactory(limits),
    clientErrorHandler: clientErrorHandler(limits),
    // REST and MCP bodies; Connect reads its own (`readMaxBytes`), webhooks
    // set theirs.
    bodyLimit: limits.maxBodyBytes,
    // Per-request logs would cost more than the requests on the hot paths;
    // errors are still logged, and metrics count every request.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
  });
  const log = options.logger;
  // One guard for everything the service fetches on a tenant's behalf.
  const outbound = options.outbound ?? DEFAULT_OUTBOUND;
  const guardedFetch = createOutboundFetch(outbound);
  const skills = createSkillPool(guardedFetch, outbound);
  const metrics = createMetrics();
  // Bound once: this counts every evaluation on the webhook path.
  const placed = {
    filter: { inline: metrics.expressionEvaluations.labels("filter", "inline"), sandbox: metrics.expressionEvaluations.labels("filter", "sandbox") },
    value: { inline: metrics.expressionEvaluations.labels("step", "inline"), sandbox: metrics.expressionEvaluations.labels("step", "sandbox") },
  };
  const sandbox = new ExpressionSandbox({
    ...options.expressions?.sandbox,
    onOverrun: (mode, reason) => metrics.expressionOverruns.inc({ use: mode === "filter" ? "filter" : "step", reason }),
    onPlaced: (mode, where) => placed[mode][where].inc(),
  });
  // One warning per trigger per minute, not one per event.
  const warned = new Map<string, number>();
  let execution: Execution | undefined = options.execution;
  const platform = createPlatform({
    ...options,
    skills,
    webhookRate: options.webhook && { perSecond: options.webhook.ratePerSecond, burst: options.webhook.burst },
    onRunsQueued: () => execution?.wake(),
    onRunCancelled: (id) => execution?.cancel(id),
    sandbox,
    filterPolicy: options.expressions?.filter,
    onFilterFailure: (trigger, reason, message) => {
      metrics.filterFailures.inc({ reason });
      const now = Date.now();
      if (reason === "suspended" || (warned.get(trigger.id) ?? 0) > now - 60_000) return;
      if (warned.size > 10_000) warned.clear();
      warned.set(trigger.id, now);
      log.warn({ tenant: trigger.tenantId, trigger: trigger.id, reason, error: message }, "trigger filter failed; the event does not match it");
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
    });
    execution = runtime;
  }
  const retention = new Retention({ store: options.store.retention, log, ...(options.retention ?? DEFAULT_RETENTION) });
  metrics.instrument(server);

  await server.register(healthSurface, { store: options.store, registry: metrics.registry, metricsToken: options.metricsToken });
  const api = (options.surfaces ?? "all") === "all";
  if (api) {
    await server.register(connectSurface, { platform, readMaxBytes: limits.maxBodyBytes });
    await server.register(restSurface, { platform });
    await server.register(mcpSurface, {
      platform,
      publicUrl: options.mcp?.publicUrl ?? "http://localhost",
      authorizationServers: options.mcp?.authorizationServers ?? [],
      version: VERSION,
    });
    await server.register(webhookSurface, {
      ingestion: platform.webhooks,
      maxBytes: options.webhook?.maxBytes ?? 1024 * 1024,
      tenantInflightBytes: options.webhook?.tenantInflightBytes ?? DEFAULT_TENANT_INFLIGHT_BYTES,
    });
    if (options.devIssuer) await server.register(devIssuerSurface, { issuer: options.devIssuer });
  }
  return {
    server,
    platform,
    skills,
    worker: runtime?.worker,
    scheduler: runtime?.scheduler,
    countExpressions(report) {
      for (const [use, reason, n] of report.overruns) metrics.expressionOverruns.inc({ use, reason }, n);
      for (const [use, where, n] of report.placed) metrics.expressionEvaluations.inc({ use, where }, n);
    },
    start() {
      // Trigger filters (API) and step arguments (a runtime here) evaluate in it.
      if (api || runtime) sandbox.warm();
      execution?.start();
      retention.start();
    },
    async stop(graceMs) {
      await retention.stop();
      await server.close();
      await execution?.stop(graceMs);
      await skills.close();
      await sandbox.close();
    },
  };
}
