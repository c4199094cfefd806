// A runtime thread of `agentplane serve`: its own store connection and
// runtime (worker, executor, and the scheduler on thread 0), driven by the
// HTTP thread's messages (src/runtime/worker-threads.ts).
import { parentPort, workerData } from "node:worker_threads";
import type { Config } from "../config.js";
import { Registry } from "prom-client";
import { createDomainMetrics } from "../domain-metrics.js";
import { FailureStreak } from "../lib/failure-streak.js";
import { SecretBox } from "../lib/secret-box.js";
import { createLogger } from "../log.js";
import { buildRuntime } from "../runtime/runtime.js";
import { StoreUnavailableError } from "../store/errors.js";
import type { FromThread, ToThread } from "../runtime/worker-threads.js";
import { openStore } from "./store.js";
import { startTracing } from "./tracing.js";
import { expressionOptions, runtimeOptions } from "./runtime-settings.js";

export interface ThreadData {
  config: Config;
  secretKey: string;
  index: number;
  scheduler: boolean;
}

const { config, secretKey, index, scheduler } = workerData as ThreadData;
const port = parentPort!;
const post = (message: FromThread) => port.postMessage(message);
// Lines go to the HTTP thread, which writes them with its own (worker-threads.ts).
const log = createLogger(config.logLevel, { write: (line: string) => post({ type: "log", line }) }).child({ thread: index });

// This thread's domain series; the HTTP thread asks for them when scraped.
const metrics = new Registry();
const observer = createDomainMetrics(metrics, config.metricsTenantLabel);

// A thread started again while the database is down waits for it rather
// than dying at once, over and over (only a store that is unavailable is
// waited for; a wrong URL or a failed migration still ends the thread).
async function openWhenAvailable() {
  const streak = new FailureStreak(log, "opening the store", 100, 2000);
  for (;;) {
    try {
      const opened = await openStore(config);
      streak.succeeded();
      return opened;
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) throw err;
      await new Promise((resolve) => setTimeout(resolve, streak.failed(err)));
    }
  }
}

const tracing = await startTracing(config.tracing, log);
const store = await openWhenAvailable();
const expressions = expressionOptions(config);
const runtime = buildRuntime({
  ...runtimeOptions(config, scheduler),
  store,
  secrets: SecretBox.fromBase64(secretKey),
  log,
  outbound: config.outbound,
  sandbox: expressions.sandbox,
  stepBudgetMs: expressions.stepBudgetMs,
  maxQueuedRuns: config.quotas.queuedRuns,
  observer,
  onRunsQueued: () => post({ type: "runsQueued" }),
});

port.on("message", (message: ToThread) => {
  switch (message.type) {
    case "wake":
      return runtime.wake();
    case "cancel":
      return runtime.cancel(message.runId);
    case "metrics":
      return void metrics.getMetricsAsJSON().then((snapshot) => post({ type: "metrics", id: message.id, snapshot }));
    case "stop":
      return void (async () => {
        await runtime.stop(message.graceMs);
        await tracing?.shutdown();
        await store.close();
        // Ends this thread only, whatever handles (skill connections) are left.
        process.exit(0);
      })();
  }
});
runtime.start();
