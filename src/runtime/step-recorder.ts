import { errorKindOfMessage } from "../service/error-kinds.js";
import { pause, pauseUntil } from "../lib/pause.js";
import type { Logger } from "pino";
import type { RunRow, RunStepRecord, StepCallAttempt } from "../store/rows.js";
import type { RunQueue } from "../store/store.js";
import { RecordLimitError, type StepHandle, type StepStart } from "./executor.js";
import { recordable, recordableError, type RecordLimits } from "./recordable.js";
import { reusable, type RecordedOutcome } from "./durable-steps.js";

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
  limits: RecordLimits;
  // Each try's CallTries.ready: the worker's check that the run is still its own.
  ready(signal: AbortSignal): Promise<void>;
}

// The steps of one run attempt, written to the store as they start, as each
// try of their call fails, and as they end: at most one write for each, and
// fewer when they come faster than the store commits (one write at a time
// per run, the next one carrying every change since). Each write is the
// whole step list, so a write that fails is made good by the next one, and
// by the outcome, which writes every step again; a failed write is only
// logged, so a store hiccup does not fail the run.
//
// What a step records is made fit for the store first (./recordable.ts):
// escaped, and cut to its cap and to what is left of the run's record. A step
// that would start with the record full fails the run (RecordLimitError), so
// neither the record nor the memory holding it grows past the cap.
//
// Durable steps (./durable-steps.ts): the outcomes earlier attempts recorded
// are looked up by step key; one reused is recorded again as this attempt's
// step, resumed from the attempt that executed it. A step keeps its key only
// when what it recorded is what the run went on with.
export class StepRecorder {
  // The steps of earlier attempts stay: each record says its attempt and worker.
  readonly steps: RunStepRecord[];
  readonly #o: StepRecorderOptions;
  #writing?: Promise<void>;
  #dirty = false;
  #closed = false;
  // The JSON bytes of the record's steps, and each step's share of them.
  #used: number;
  readonly #sizes = new Map<RunStepRecord, number>();
  // Outcomes of earlier attempts to reuse, by step key.
  readonly #outcomes = new Map<string, RunStepRecord>();

  constructor(options: StepRecorderOptions) {
    this.#o = options;
    this.steps = [...options.run.steps];
    this.#used = Buffer.byteLength(JSON.stringify(this.steps));
    for (const step of this.steps) if (reusable(step)) this.#outcomes.set(step.key!, step);
  }

  // The outcome recorded for the step with this key by an earlier attempt,
  // recorded now as this attempt's step: resumed, with the arguments, result
  // and error recorded then (within what is left of the record), no call.
  resume(key: string): RecordedOutcome | undefined {
    const done = this.#outcomes.get(key);
    if (!done) return undefined;
    if (!this.#closed) {
      const { limits, run, owner } = this.#o;
      const t = this.#o.now();
      const step: RunStepRecord = {
        kind: done.kind,
        skillId: done.skillId,
        tool: done.tool,
        arguments: recordable(done.arguments, this.#room(limits.stepArgumentsBytes)).value,
        result: recordable(done.result, this.#room(limits.stepResultBytes)).value,
        error: done.error,
        startTime: t,
        endTime: t,
        status: done.status,
        attempt: run.attempt,
        worker: owner,
        callAttempts: [],
        resumedFromAttempt: done.attempt ?? run.attempt,
      };
      this.steps.push(step);
      this.#measure(step);
      this.#o.log.debug({ ...this.#about(step), resumedFromAttempt: step.resumedFromAttempt }, "run step resumed: its recorded outcome reused");
      this.#save();
    }
    return { kind: done.kind, result: done.result, error: done.error };
  }

  // What is left of the run's record for one more value, within `cap`.
  #room(cap: number): number {
    return Math.max(0, Math.min(cap, this.#o.limits.runRecordBytes - this.#used));
  }

  #measure(step: RunStepRecord): void {
    const bytes = Buffer.byteLength(JSON.stringify(step));
    this.#used += bytes - (this.#sizes.get(step) ?? 0);
    this.#sizes.set(step, bytes);
  }

  // The run's output as it is recorded (after the last step).
  output(value: unknown): unknown {
    return recordable(value, this.#room(this.#o.limits.outputBytes)).value;
  }

  error(text: string): string {
    return recordableError(text, this.#o.limits.errorChars);
  }

  start(start: StepStart): StepHandle {
    const { limits } = this.#o;
    if (!this.#closed && this.#used >= limits.runRecordBytes)
      throw new RecordLimitError(`record_limit: the run's record reached ${limits.runRecordBytes} bytes (AGENTPLANE_RUN_RECORD_MAX_BYTES)`);
    const t = this.#o.now();
    const first: StepCallAttempt = { startTime: t, error: "" };
    const step: RunStepRecord = {
      ...start,
      arguments: recordable(start.arguments, this.#room(limits.stepArgumentsBytes)).value,
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
      this.#measure(step);
      this.#save();
    }
    return {
      ready: (signal) => this.#o.ready(signal),
      backoff: async (error, delayMs, signal) => {
        if (!open()) return pause(delayMs, signal);
        error = this.error(error);
        this.#o.log.debug({ ...this.#about(step), kind: errorKindOfMessage(error), error, retryInMs: delayMs }, "run step try failed; retrying");
        const t = this.#o.now();
        current.endTime = t;
        current.error = error;
        // The retry is recorded once, with the time it is due, and does not
        // begin before this recorder's clock reads that time.
        const due = t + delayMs;
        current = { startTime: due, error: "" };
        step.callAttempts!.push(current);
        this.#measure(step);
        this.#save();
        await pauseUntil(due, this.#o.now, signal);
      },
      end: (outcome) => {
        const capped = recordable(outcome.result, limits.stepResultBytes);
        const kept = capped.marker ? capped.value : outcome.result;
        if (!open()) return kept;
        // Less of the run's record may be left than the step's cap.
        const room = this.#room(limits.stepResultBytes);
        const result = capped.bytes <= room ? capped.value : recordable(capped.value, room).value;
        const error = this.error(outcome.error);
        // Escaped or cut to fit: not the outcome the run went on with, so
        // not one to reuse (the step would run again, with its idempotency key).
        if (result !== kept || error !== outcome.error) delete step.key;
        complete(step, this.#o.now(), { result, error });
        this.#measure(step);
        if (error) this.#o.log.info({ ...this.#about(step), kind: errorKindOfMessage(error), error }, "run step failed");
        this.#save();
        return kept;
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
      if (step.status === "running" && step.attempt === this.#o.run.attempt) {
        // Ended by the run around it: no outcome of its own.
        delete step.key;
        complete(step, t, { error: this.error(error) });
      }
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
