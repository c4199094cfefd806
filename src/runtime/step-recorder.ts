import { errorKindOfMessage } from "./error-kinds.js";
import { pause, pauseUntil } from "../lib/pause.js";
import type { Logger } from "pino";
import type { RunRow, RunStepRecord, StepCallAttempt } from "../store/rows.js";
import type { RunQueue } from "../store/store.js";
import type { StepHandle, StepStart } from "./executor.js";

// Ends a step and its current try with the step's outcome.
function complete(step: RunStepRecord, t: number, { result, error }: { result?: unknown; error: string }): void {
  const current = step.callAttempts?.at(-1);
  if (current && current.endTime === undefined) {
    // A retry that was due but never began (the run was aborted in its backoff) is no try.
    if (current.startTime > t) step.callAttempts!.pop();
    else Object.assign(current, { endTime: t, error });
  }
  Object.assign(step, { status: error ? "failed" : "succeeded", result, error, endTime: t });
}

export interface StepRecorderOptions {
  queue: RunQueue;
  owner: string;
  run: RunRow;
  // Bound to the run's ids: a failed step and a failed write are logged.
  log: Logger;
  now: () => number;
}

// The steps of one run attempt, written to the store as they start, as each
// try of their call fails, and as they end: at most one write for each, and
// fewer when they come faster than the store commits (one write at a time
// per run, the next one carrying every change since). Each write is the
// whole step list, so a write that fails is made good by the next one, and
// by the outcome, which writes every step again; a failed write is only
// logged, so a store hiccup does not fail the run.
export class StepRecorder {
  // The steps of earlier attempts stay: each record says its attempt and worker.
  readonly steps: RunStepRecord[];
  readonly #o: StepRecorderOptions;
  #writing?: Promise<void>;
  #dirty = false;
  #closed = false;

  constructor(options: StepRecorderOptions) {
    this.#o = options;
    this.steps = [...options.run.steps];
  }

  start(start: StepStart): StepHandle {
    const t = this.#o.now();
    const first: StepCallAttempt = { startTime: t, error: "" };
    const step: RunStepRecord = {
      ...start,
      error: "",
      startTime: t,
      status: "running",
      attempt: this.#o.run.attempt,
      worker: this.#o.owner,
      callAttempts: [first],
    };
    let current = first;
    // A handle outliving its attempt (a call that ignored the abort after a
    // timeout) changes nothing: the outcome is already written.
    const open = () => !this.#closed && step.status === "running";
    if (!this.#closed) {
      this.steps.push(step);
      this.#save();
    }
    return {
      backoff: async (error, delayMs, signal) => {
        if (!open()) return pause(delayMs, signal);
        this.#o.log.debug({ ...this.#about(step), kind: errorKindOfMessage(error), error, retryInMs: delayMs }, "run step try failed; retrying");
        const t = this.#o.now();
        current.endTime = t;
        current.error = error;
        // The retry is recorded once, with the time it is due, and does not
        // begin before this recorder's clock reads that time.
        const due = t + delayMs;
        current = { startTime: due, error: "" };
        step.callAttempts!.push(current);
        this.#save();
        await pauseUntil(due, this.#o.now, signal);
      },
      end: (outcome) => {
        if (!open()) return;
        complete(step, this.#o.now(), outcome);
        if (outcome.error) this.#o.log.info({ ...this.#about(step), kind: errorKindOfMessage(outcome.error), error: outcome.error }, "run step failed");
        this.#save();
      },
    };
  }

  // Ends recording when the attempt's execution ends: a step of this attempt
  // still running (the run timed out or failed around it) fails with the
  // run's error. Resolves once the write under way, if any, has settled, so
  // that the outcome is written after it.
  async close(error: string): Promise<void> {
    this.#closed = true;
    const t = this.#o.now();
    for (const step of this.steps) {
      if (step.status === "running" && step.attempt === this.#o.run.attempt) complete(step, t, { error });
    }
    await this.#writing;
  }

  // A step as its log lines name it: its place in the run and what it called.
  #about(step: RunStepRecord) {
    return { attempt: step.attempt, step: this.steps.indexOf(step), stepKind: step.kind, skill: step.skillId || undefined, tool: step.tool };
  }

  #save(): void {
    if (this.#closed) return;
    if (this.#writing) {
      this.#dirty = true;
      return;
    }
    const { queue, owner, run, log, now } = this.#o;
    // The store serializes the steps before recordSteps returns: they may change meanwhile.
    this.#writing = queue
      .recordSteps(owner, run.id, this.steps, now())
      .then(
        () => {},
        (err: unknown) => log.warn({ err }, "recording a run step failed"),
      )
      .finally(() => {
        this.#writing = undefined;
        if (this.#dirty) {
          this.#dirty = false;
          this.#save();
        }
      });
  }
}
