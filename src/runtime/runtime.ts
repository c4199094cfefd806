// The runtime side of the service, constructible apart from the HTTP side:
// the worker that claims and executes runs, the scheduler, and the executor
// with what it needs (skills behind the outbound guard, models, the
// expression sandbox). One per thread that executes runs.
import type { Logger } from "pino";
import { ExpressionSandbox, type SandboxOptions } from "../integrations/expressions/sandbox.js";
import type { SkillPool } from "../integrations/mcp-client/skill-pool.js";
import { createChatModel } from "../integrations/model/chat-model.js";
import type { FetchLike } from "../integrations/outbound/guarded-fetch.js";
import { createOutboundFetch, type OutboundOptions } from "../integrations/outbound/outbound.js";
import { createSkillPool } from "../integrations/skill-pool-factory.js";
import { NO_OBSERVER, type Observer } from "../lib/observer.js";
import type { SecretBox } from "../lib/secret-box.js";
import type { Store } from "../store/store.js";
import { DEFAULT_STEP_BUDGET_MS } from "../service/limits.js";
import { TenantSlugs } from "../service/tenant-slugs.js";
import { createAgentExecutor } from "./agent-executor.js";
import type { Executor } from "./executor.js";
import type { RecordLimits } from "./recordable.js";
import { Scheduler } from "./scheduler.js";
import { createToolCaller } from "./tool-calls.js";
import { Worker } from "./worker.js";

export { DEFAULT_STEP_BUDGET_MS };

export interface RuntimeOptions {
  // Default: the agent runtime (tool calls on skills, model loops).
  executor?: Executor;
  // Runs executing at once in this runtime.
  concurrency: number;
  leaseMs: number;
  maxAttempts: number;
  // How often an idle worker looks for runs no signal announced (runs
  // queued by another process without a change feed, expired leases).
  idlePollMs?: number;
  // The worker's clock (leases, step times); Date.now unless given: a test
  // steps a worker past its lease with it, as a stall would.
  now?: () => number;
  // Caps on what a run records; DEFAULT_RECORD_LIMITS unless given.
  recordLimits?: RecordLimits;
  // The scheduler fires schedule triggers: one per process group (tests
  // drive it by hand instead).
  scheduler: boolean;
  // How often the scheduler reads the triggers with no change signalled
  // (Scheduler's default unless given).
  scheduleRefreshMs?: number;
}

// What executes runs, wherever it is: a runtime on this thread, or worker
// threads. The API side tells it about runs it queued or cancelled.
export interface Execution {
  wake(): void;
  cancel(runId: string): void;
  start(): void;
  // Stops claiming, finishes or releases in-flight runs within `graceMs`.
  stop(graceMs?: number): Promise<void>;
  // The metric registries of executions elsewhere (threads), as prom-client
  // JSON, merged with this thread's when scraped.
  metricSnapshots?(): Promise<unknown[]>;
}

// The outbound guard, skill connections and sandbox a runtime executes with;
// on a thread that also serves the API they are the API's own.
export interface RuntimeTools {
  fetch: FetchLike;
  skills: SkillPool;
  sandbox: ExpressionSandbox;
}

export interface BuildRuntimeOptions extends RuntimeOptions {
  store: Store;
  secrets: SecretBox;
  log: Logger;
  // Shared tools; without them the runtime builds (and closes) its own from
  // `outbound` and `sandbox`.
  tools?: RuntimeTools;
  outbound?: OutboundOptions;
  sandbox?: Partial<Omit<SandboxOptions, "onOverrun" | "onPlaced">>;
  // Told of runs, skill and model calls, schedule slots and, in the
  // runtime's own sandbox, expressions (metrics).
  observer?: Observer;
  stepBudgetMs?: number;
  // A schedule slot is skipped for a tenant with this many queued runs.
  maxQueuedRuns?: number;
  // Schedule slots queued runs: other runtimes of the process group may
  // claim them too.
  onRunsQueued?: () => void;
}

export interface Runtime extends Execution {
  worker: Worker;
  scheduler?: Scheduler;
}

export function buildRuntime(options: BuildRuntimeOptions): Runtime {
  const { store, log } = options;
  const observer = options.observer ?? NO_OBSERVER;
  const own = !options.tools;
  const fetch = options.tools?.fetch ?? createOutboundFetch(options.outbound);
  const use = (mode: string) => (mode === "filter" ? "filter" : "step");
  const tools: RuntimeTools = options.tools ?? {
    fetch,
    skills: createSkillPool(fetch, options.outbound, observer),
    sandbox: new ExpressionSandbox({
      ...options.sandbox,
      onOverrun: (mode, kind) => observer.expressionOverrun(use(mode), kind),
      onPlaced: (mode, where) => observer.expressionPlaced(use(mode), where),
    }),
  };
  const executor =
    options.executor ??
    createAgentExecutor({
      store,
      secrets: options.secrets,
      tools: createToolCaller(tools.skills, options.secrets, observer),
      models: createChatModel({ fetch: tools.fetch }),
      log,
      sandbox: tools.sandbox,
      stepBudgetMs: options.stepBudgetMs ?? DEFAULT_STEP_BUDGET_MS,
      observer,
    });
  const { concurrency, leaseMs, maxAttempts, recordLimits, idlePollMs, now } = options;
  const slugs = new TenantSlugs(store.tenants);
  const worker = new Worker({ queue: store.queue, executor, log, concurrency, leaseMs, maxAttempts, recordLimits, ...(idlePollMs !== undefined && { idlePollMs }), ...(now && { now }), observer, tenantSlug: (id) => slugs.get(id) });
  const scheduler = options.scheduler
    ? new Scheduler({
        store: store.schedules,
        // Trigger changes anywhere re-tick it at once.
        signals: store.signals,
        log,
        onRunsQueued: () => {
          worker.wake();
          options.onRunsQueued?.();
        },
        maxQueuedRuns: options.maxQueuedRuns ?? Infinity,
        observer,
        ...(options.scheduleRefreshMs !== undefined && { refreshMs: options.scheduleRefreshMs }),
      })
    : undefined;
  // What other processes did, as the store reports it. Not bound: a test may
  // replace the worker's wake().
  const unsubscribe = [store.signals.onRunsQueued(() => worker.wake()), store.signals.onRunCancelled((id) => worker.cancel(id))];
  return {
    worker,
    scheduler,
    wake: () => worker.wake(),
    cancel: (id) => worker.cancel(id),
    start() {
      worker.start();
      scheduler?.start();
    },
    async stop(graceMs) {
      for (const off of unsubscribe) off();
      scheduler?.stop();
      await worker.stop(graceMs);
      if (own) {
        await tools.skills.close();
        await tools.sandbox.close();
      }
    },
  };
}
