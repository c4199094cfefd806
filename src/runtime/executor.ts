import type { CallTries } from "../lib/call-tries.js";
import type { RunStepRecord } from "../store/rows.js";
import type { RecordedOutcome } from "./durable-steps.js";
import type { ClaimedRun } from "../store/store.js";

// What an executor knows of a step when it starts. `key`: what the step is
// on any attempt of the run (./durable-steps.ts); a step without one is
// never reused.
export type StepStart = Pick<RunStepRecord, "kind" | "skillId" | "tool" | "arguments" | "key">;

// A step in progress. Its tries and its end are recorded as they happen;
// the calls never wait for the store.
export interface StepHandle extends CallTries {
  // Completes the step: succeeded, or failed when `error` is set. Ends its
  // current try with the same error. Answers what the run keeps of the
  // result for its later steps and its model: the result itself, or its
  // truncation marker when past AGENTPLANE_RUN_STEP_RESULT_MAX_BYTES, so
  // that a run holds no more of its results in memory than that each.
  end(outcome: { result?: unknown; error: string }): unknown;
}

export interface ExecutionContext {
  // Aborted when the run is cancelled, its lease is lost, or the worker stops.
  signal: AbortSignal;
  // Records a step as `running` when it starts, so GetRun shows the call in
  // flight; the handle completes it.
  startStep(step: StepStart): StepHandle;
  // Durable steps: the outcome an earlier attempt recorded for the step with
  // this key, recorded again as this attempt's step (resumed, not executed);
  // undefined when there is none to reuse, and the step is to be executed.
  resume(key: string): RecordedOutcome | undefined;
}

export type ExecutionResult =
  | { status: "succeeded"; output: unknown }
  | { status: "failed" | "timed_out"; error: string };

// Runs one attempt of a run: `agent-executor.ts` (plans and model loops).
export interface Executor {
  execute(run: ClaimedRun, ctx: ExecutionContext): Promise<ExecutionResult>;
}

// Records one step and succeeds: for tests and benches that measure what
// surrounds the execution.
export const noopExecutor: Executor = {
  async execute(run, ctx) {
    const step = ctx.startStep({ kind: "tool_call", skillId: "", tool: "noop", arguments: { run_id: run.id } });
    step.end({ result: { ok: true }, error: "" });
    return { status: "succeeded", output: { ok: true } };
  },
};

// Thrown by startStep when the run's record is full (see step-recorder.ts):
// the run fails with this message, whose kind is `record_limit`.
export class RecordLimitError extends Error {
  override name = "RecordLimitError";
}
