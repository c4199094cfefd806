import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { DevIssuer } from "./integrations/identity/dev-issuer.js";
import type { Authenticator } from "./integrations/identity/index.js";
import type { SecretBox } from "./lib/secret-box.js";
import { createMetrics } from "./metrics.js";
import { createPlatform, type Platform } from "./service/platform.js";
import type { Store } from "./store/store.js";
import { connectSurface } from "./surfaces/connect.js";
import { devIssuerSurface } from "./surfaces/dev-issuer.js";
import { h2cServerFactory } from "./surfaces/h2c-server.js";
import { clientErrorHandler, DEFAULT_HTTP_LIMITS, type HttpLimits } from "./surfaces/http-limits.js";
import { healthSurface } from "./surfaces/health.js";
import { mcpSurface } from "./surfaces/mcp.js";
import { VERSION } from "./version.js";
import { createSkillPool, type OutboundOptions } from "./integrations/skill-pool-factory.js";
import type { SkillPool } from "./integrations/mcp-client/skill-pool.js";
import { restSurface } from "./surfaces/rest.js";
import { webhookSurface } from "./surfaces/webhooks.js";
import type { Executor } from "./runtime/executor.js";
import { Scheduler } from "./runtime/scheduler.js";
import { Worker } from "./runtime/worker.js";
import { createAgentExecutor } from "./runtime/agent-executor.js";
import { createToolCaller } from "./runtime/tool-calls.js";

export interface RuntimeOptions {
  // Default: the agent runtime (tool calls on skills, model loops).
  executor?: Executor;
  concurrency: number;
  leaseMs: number;
  maxAttempts: number;
  // The scheduler fires schedule triggers; tests drive it by hand instead.
  scheduler: boolean;
}

export interface AppOptions {
  store: Store;
  secrets: SecretBox;
  authenticator: Authenticator;
  logger: Logger;
  tenantClaim?: string;
  metricsToken?: string;
  devIssuer?: DevIssuer;
  webhook?: { maxBytes: number; ratePerSecond: number; burst: number };
  // Without it, runs are queued but not executed by this process.
  runtime?: RuntimeOptions;
  mcp?: { publicUrl: string; authorizationServers: string[] };
  outbound?: OutboundOptions;
  http?: HttpLimits;
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
  const skills = createSkillPool(options.outbound);
  let worker: Worker | undefined;
  let scheduler: Scheduler | undefined;
  const platform = createPlatform({
    ...options,
    skills,
    webhookRate: options.webhook && { perSecond: options.webhook.ratePerSecond, burst: options.webhook.burst },
    onRunsQueued: () => worker?.wake(),
    onRunCancelled: (id) => worker?.cancel(id),
    onFilterError: (triggerId, err) => log.warn({ triggerId, err }, "trigger filter failed on an event; treated as no match"),
  });
  if (options.runtime) {
    const { concurrency, leaseMs, maxAttempts } = options.runtime;
    const executor =
      options.runtime.executor ??
      createAgentExecutor({ store: options.store, secrets: options.secrets, tools: createToolCaller(skills, options.secrets), log });
    worker = new Worker({ queue: options.store.queue, executor, log, concurrency, leaseMs, maxAttempts });
    if (options.runtime.scheduler) scheduler = new Scheduler({ store: options.store.schedules, log, onRunsQueued: () => worker?.wake() });
  }
  const metrics = createMetrics();
  metrics.instrument(server);

  await server.register(healthSurface, { store: options.store, registry: metrics.registry, metricsToken: options.metricsToken });
  await server.register(connectSurface, { platform, readMaxBytes: limits.maxBodyBytes });
  await server.register(restSurface, { platform });
  await server.register(mcpSurface, {
    platform,
    publicUrl: options.mcp?.publicUrl ?? "http://localhost",
    authorizationServers: options.mcp?.authorizationServers ?? [],
    version: VERSION,
  });
  await server.register(webhookSurface, { ingestion: platform.webhooks, maxBytes: options.webhook?.maxBytes ?? 1024 * 1024 });
  if (options.devIssuer) await server.register(devIssuerSurface, { issuer: options.devIssuer });
  return {
    server,
    platform,
    skills,
    worker,
    scheduler,
    start() {
      worker?.start();
      scheduler?.start();
    },
    async stop(graceMs) {
      scheduler?.stop();
      await server.close();
      await worker?.stop(graceMs);
      await skills.close();
    },
  };
}
