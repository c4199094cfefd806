import type { RunRow, RunStepRecord } from "../store/rows.js";

export interface ExecutionContext {
  // Aborted when the run is cancelled, its lease is lost, or the worker stops.
  signal: AbortSignal;
  // Persists a step as soon as it ends, so GetRun shows progress.
  recordStep(step: RunStepRecord): Promise<void>;
}

export type ExecutionResult =
  | { status: "succeeded"; output: unknown }
  | { status: "failed" | "timed_out"; error: string };

// Runs one attempt of a run. The agent runtime fills this in; until then the
// no-op executor records one step and succeeds.
export interface Executor {
  execute(run: RunRow, ctx: ExecutionContext): Promise<ExecutionResult>;
}

export const noopExecutor: Executor = {
  async execute(run, ctx) {
    const startTime = Date.now();
    await ctx.recordStep({
      kind: "tool_call",
      skillId: "",
      tool: "noop",
      arguments: { run_id: run.id },
      result: { ok: true },
      error: "",
      startTime,
      endTime: Date.now(),
    });
    return { status: "succeeded", output: { ok: true } };
  },
};
