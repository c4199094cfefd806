import type { DescMethod } from "@bufbuild/protobuf";
import { PlatformService } from "../../gen/platform/v1/platform_service_pb.js";
import type { Authenticator } from "../integrations/identity/index.js";
import type { SecretBox } from "../lib/secret-box.js";
import { annotate, ATTR } from "../lib/tracing.js";
import type { Store } from "../store/store.js";
import { PLATFORM_ADMIN_SCOPE, createAccess, type CallerInput, type Surface } from "./access.js";
import { fromStoreError, notFound, storeErrorsTranslated } from "./errors.js";
import { DEFAULT_FILTER_POLICY, EventMatcher, type EventMatcherOptions, type FilterPolicy } from "./event-matching.js";
import type { ExpressionSandbox } from "../integrations/expressions/sandbox.js";
import { DEFAULT_JSON_MAX_DEPTH, DEFAULT_QUOTAS, DEFAULT_SCHEDULE_MIN_INTERVAL_SECONDS, DEFAULT_STEP_BUDGET_MS, type Quotas } from "./limits.js";
import { WebhookLookups } from "./lookup-cache.js";
import type { SkillPool } from "../integrations/mcp-client/skill-pool.js";
import { createWebhookIngestion } from "./webhooks.js";
import { createWebhookDeliveries } from "./webhook-deliveries.js";
import { checkStorableRequest } from "./validate.js";
import { agentHandlers } from "./agents.js";
import { eventHandlers } from "./events.js";
import type { Handler, PlatformHandlers, PlatformStreamHandlers, ServiceDeps } from "./handlers.js";
import type { RunsQueued } from "./queued-runs.js";
import { expressionTrialHandlers } from "./expression-trial.js";
import { memberHandlers } from "./members.js";
import { overviewHandlers } from "./overview.js";
import { membershipHandlers } from "./memberships.js";
import { runHandlers } from "./runs.js";
import { closedOnAbort, DEFAULT_STREAM_LIMITS, Streams, type StreamLimits } from "./streams.js";
import { eventStreamHandlers } from "./watch-events.js";
import { runStreamHandlers } from "./watch-runs.js";
import { skillHandlers } from "./skills.js";
import { tenantHandlers } from "./tenants.js";
import { triggerHandlers } from "./triggers.js";
import { webhookSourceHandlers } from "./webhook-sources.js";

export interface PlatformOptions {
  store: Store;
  secrets: SecretBox;
  authenticator: Authenticator;
  tenantClaim?: string;
  now?: () => number;
  webhookRate?: { perSecond: number; burst: number };
  onRunsQueued?: RunsQueued;
  onRunCancelled?: (runId: string) => void;
  skills: SkillPool;
  // Where tenant-authored expressions run, and the budget of trigger filters.
  sandbox: ExpressionSandbox;
  filterPolicy?: Partial<FilterPolicy>;
  onFilterFailure?: EventMatcherOptions["onFilterFailure"];
  quotas?: Quotas;
  // Deepest nesting of a webhook payload or run input.
  jsonMaxDepth?: number;
  // Shortest interval between two slots of a schedule trigger.
  scheduleMinIntervalSeconds?: number;
  // Bounds of the Watch… streams.
  streams?: Partial<StreamLimits>;
  // Where the service is reached from outside, without a trailing slash.
  publicUrl?: string;
  // A plan step's arguments' budget, for TestExpression (the runtime's).
  stepBudgetMs?: number;
}

function told<C extends { tenant?: { id: string; slug: string } }>(caller: CallerInput, call: C): C {
  if (call.tenant) caller.onTenant?.(call.tenant);
  return call;
}

// The one implementation every surface calls: authorize by the method's
// descriptor, then run the resource module's handler.
export function createPlatform(options: PlatformOptions) {
  const now = options.now ?? Date.now;
  const store = options.store;
  const matcher = new EventMatcher({
    store,
    sandbox: options.sandbox,
    policy: options.filterPolicy,
    now: options.now,
    onFilterFailure: options.onFilterFailure,
  });
  const lookups = new WebhookLookups(store);
  // Late-bound: the worker that listens is created after the platform.
  const onRunsQueued: RunsQueued = (via, runs) => options.onRunsQueued?.(via, runs);
  const quotas = options.quotas ?? DEFAULT_QUOTAS;
  const jsonMaxDepth = options.jsonMaxDepth ?? DEFAULT_JSON_MAX_DEPTH;
  const access = createAccess(options);
  // One ingestion for the webhook surface and the handlers (test events):
  // one rate limiter per source, one queued-runs count per tenant.
  const webhooks = createWebhookIngestion({
    store,
    matcher,
    lookups,
    ratePerSecond: options.webhookRate?.perSecond ?? 100,
    burst: options.webhookRate?.burst ?? 200,
    now,
    onRunsQueued,
    maxDepth: jsonMaxDepth,
    maxQueuedRuns: quotas.queuedRuns,
  });
  // A source's mapping runs on the ingest path, as trigger filters do, and
  // under their budget.
  const deliveries = createWebhookDeliveries({
    ingestion: webhooks,
    lookups,
    secrets: options.secrets,
    sandbox: options.sandbox,
    mappingBudgetMs: options.filterPolicy?.budgetMs ?? DEFAULT_FILTER_POLICY.budgetMs,
    now,
  });
  const deps: ServiceDeps = {
    store,
    secrets: options.secrets,
    now,
    matcher,
    lookups,
    skills: options.skills,
    onRunsQueued,
    onRunCancelled: (id) => options.onRunCancelled?.(id),
    quotas,
    jsonMaxDepth,
    scheduleMinIntervalSeconds: options.scheduleMinIntervalSeconds ?? DEFAULT_SCHEDULE_MIN_INTERVAL_SECONDS,
    webhooks,
    roles: access.roles,
    sandbox: options.sandbox,
    publicUrl: options.publicUrl ?? "http://localhost:8080",
  };
  const handlers: PlatformHandlers = {
    ...tenantHandlers(deps),
    ...membershipHandlers(deps),
    ...memberHandlers(deps),
    ...agentHandlers(deps),
    ...skillHandlers(deps),
    ...triggerHandlers(deps),
    ...webhookSourceHandlers(deps),
    ...eventHandlers(deps),
    ...runHandlers(deps),
    ...overviewHandlers(deps),
    ...expressionTrialHandlers(deps, {
      filterMs: options.filterPolicy?.budgetMs ?? DEFAULT_FILTER_POLICY.budgetMs,
      stepMs: options.stepBudgetMs ?? DEFAULT_STEP_BUDGET_MS,
    }),
  };
  const streams = new Streams({ ...DEFAULT_STREAM_LIMITS, ...options.streams }, deps.now);
  const streamHandlers: PlatformStreamHandlers = {
    ...runStreamHandlers(deps, streams),
    ...eventStreamHandlers(deps, streams),
  };

  // Every way in translates store errors (the streams too, below), so no
  // handler has to.
  const entries = storeErrorsTranslated({
    // For the local operator CLI, which works on the configured store with
    // the machine's own authority (like `psql` as the database owner): runs a
    // handler as platform admin, in the given tenant when one is named.
    invokeAsOperator<K extends keyof PlatformHandlers>(
      name: K,
      request: Parameters<PlatformHandlers[K]>[0],
      tenantSlug?: string,
    ): ReturnType<Handler<K>> {
      const principal = { subject: "local-operator", scopes: new Set([PLATFORM_ADMIN_SCOPE]), claims: {} };
      const handler: Handler<K> = handlers[name];
      const tenant = tenantSlug === undefined ? Promise.resolve(undefined) : options.store.tenants.get(tenantSlug);
      return tenant.then((row) => {
        if (tenantSlug !== undefined && row?.slug !== tenantSlug) throw notFound("tenant", tenantSlug);
        return handler(request, { principal, surface: "api", tenant: row && { id: row.id, slug: row.slug }, role: "admin" });
      });
    },
    async standing(caller: CallerInput, surface: Surface) {
      return told(caller, await access.standing(caller, surface));
    },
    // Untyped entry for surfaces that dispatch by descriptor (REST, MCP); the
    // request is a message of `method.input`, built by the surface.
    async invoke(method: DescMethod, request: unknown, caller: CallerInput, surface: Surface): Promise<unknown> {
      const call = told(caller, await access.authorize(method, caller, surface));
      if (call.tenant) annotate({ [ATTR.tenant]: call.tenant.id });
      checkStorableRequest(method, request);
      const handler = handlers[method.localName as keyof PlatformHandlers] as (req: unknown, c: typeof call) => Promise<unknown>;
      return handler(request, call);
    },
  });

  return {
    service: PlatformService,
    webhooks,
    deliveries,
    ...entries,
    // The same for a server-streaming method: authorized as a unary call
    // (before the first message), then the handler's messages until it ends
    // or `signal` aborts (the caller went away; then at once, even while its
    // reader holds a message and never comes back). Its store errors come while
    // its messages are read, so they are translated here.
    stream(method: DescMethod, request: unknown, caller: CallerInput, signal: AbortSignal): AsyncGenerator<unknown> {
      return closedOnAbort(
        (async function* () {
          try {
            const call = told(caller, await access.authorize(method, caller, "api"));
            if (call.tenant) annotate({ [ATTR.tenant]: call.tenant.id });
            checkStorableRequest(method, request);
            const handler = streamHandlers[method.localName as keyof PlatformStreamHandlers] as (
              req: unknown,
              c: typeof call,
              s: AbortSignal,
            ) => AsyncIterable<unknown>;
            yield* handler(request, call, signal);
          } catch (err) {
            fromStoreError(err);
          }
        })(),
        signal,
      );
    },
    allows: access.allows,
    // Streams open in this process.
    openStreams: () => streams.count,
    // Ends every open stream and refuses new ones (shutdown).
    closeStreams: () => streams.close(),
  };
}

export type Platform = ReturnType<typeof createPlatform>;
