// The configuration's settings for executing runs, in the plain options the
// app and the runtime take; shared by the HTTP thread and the runtime threads.
import type { ExpressionOptions } from "../app.js";
import type { Config } from "../config.js";
import type { RuntimeOptions } from "../runtime/runtime.js";

export function expressionOptions(config: Config): ExpressionOptions {
  return {
    sandbox: {
      workers: config.expressions.workers,
      maxDepth: config.expressions.maxDepth,
      maxChars: config.expressions.maxChars,
      memoryMb: config.expressions.memoryMb,
      inlineMsPerSecond: config.expressions.inlineMsPerSecond,
    },
    filter: { budgetMs: config.expressions.filterBudgetMs },
    stepBudgetMs: config.expressions.stepBudgetMs,
  };
}

export function runtimeOptions(config: Config, scheduler: boolean): RuntimeOptions {
  return {
    concurrency: config.workerConcurrency,
    leaseMs: config.runLeaseMs,
    idlePollMs: config.workerIdlePollMs,
    maxAttempts: config.runMaxAttempts,
    recordLimits: config.recordLimits,
    scheduler,
  };
}
