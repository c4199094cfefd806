// A runtime thread of `agentplane serve`: its own store connection and
// runtime (worker, executor, and the scheduler on thread 0), driven by the
// HTTP thread's messages (src/runtime/worker-threads.ts).
import { parentPort, workerData } from "node:worker_threads";
import type { Config } from "../config.js";
import { SecretBox } from "../lib/secret-box.js";
import { createLogger } from "../log.js";
import { buildRuntime } from "../runtime/runtime.js";
import type { FromThread, ToThread } from "../runtime/worker-threads.js";
import { openStore } from "./commands.js";
import { startTracing } from "./tracing.js";
import { expressionOptions, runtimeOptions } from "./runtime-settings.js";

export interface ThreadData {
  config: Config;
  secretKey: string;
  index: number;
  scheduler: boolean;
}

const REPORT_EVERY_MS = 1000;

const { config, secretKey, index, scheduler } = workerData as ThreadData;
const port = parentPort!;
const post = (message: FromThread) => port.postMessage(message);
const log = createLogger(config.logLevel).child({ thread: index });

// Expression counts, sent to the HTTP thread's metrics once a second.
const overruns = new Map<string, number>();
const placed = new Map<string, number>();
const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
const entries = (map: Map<string, number>) => [...map].map(([key, n]) => [...(JSON.parse(key) as [string, string]), n] as [string, string, number]);
const reporting = setInterval(() => {
  if (!overruns.size && !placed.size) return;
  post({ type: "expressions", overruns: entries(overruns), placed: entries(placed) });
  overruns.clear();
  placed.clear();
}, REPORT_EVERY_MS);
reporting.unref();
const use = (mode: string) => (mode === "filter" ? "filter" : "step");

const tracing = await startTracing(config.tracing, log);
const store = await openStore(config);
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
  onExpression: {
    overrun: (mode, kind) => count(overruns, JSON.stringify([use(mode), kind])),
    placed: (mode, where) => count(placed, JSON.stringify([use(mode), where])),
  },
  onRunsQueued: () => post({ type: "runsQueued" }),
});

port.on("message", (message: ToThread) => {
  switch (message.type) {
    case "wake":
      return runtime.wake();
    case "cancel":
      return runtime.cancel(message.runId);
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
