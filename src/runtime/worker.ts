import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { NO_OBSERVER, type Observer } from "../lib/observer.js";
import { FailureStreak } from "../lib/failure-streak.js";
import { pause } from "../lib/pause.js";
import { StoreRefusedError, StoreUnavailableError } from "../store/errors.js";
import type { ClaimedRun, RunOutcome, RunQueue } from "../store/store.js";
import { errorKindOf, errorKindOfMessage } from "../service/error-kinds.js";
import type { ExecutionResult, Executor } from "./executor.js";
import { DEFAULT_RECORD_LIMITS, type RecordLimits } from "./recordable.js";
import { traceOutcome, traceRun } from "./run-tracing.js";
import { StepRecorder } from "./step-recorder.js";

export interface WorkerOptions {
  queue: RunQueue;
  executor: Executor;
  log: Logger;
  // Runs executing at once in this process.
  concurrency: number;
  leaseMs: number;
  maxAttempts: number;
  // Upper bound on sleeping with nothing to do: a safety net for a missed
  // signal. In-process queueing calls wake().
  idlePollMs?: number;
  now?: () => number;
  // A tenant's slug for the run lines (cached; undefined when unknown).
  tenantSlug?: (tenantId: string) => Promise<string | undefined>;
  // Told of every run attempt whose outcome was recorded (metrics).
  observer?: Observer;
  // Caps on what a run records (./recordable.ts).
  recordLimits?: RecordLimits;
}

// How long stop() lets running runs finish when not told.
export const DEFAULT_STOP_GRACE_MS = 10_000;

const FINISH_RETRY_FIRST_MS = 100;
const FINISH_RETRY_MAX_MS = 5_000;

// A run's outcome when the store refused it: failed, its steps kept without
// the values they recorded (the likely cause) and without the text of their
// errors beyond the kind.
function rejected(outcome: RunOutcome, error: string): RunOutcome {
  const bare = (text: string) => (text ? errorKindOfMessage(text) : "");
  return {
    status: "failed",
    error,
    steps: outcome.steps.map((s) => ({
      ...s,
      arguments: undefined,
      result: undefined,
      // Without its values a step is no outcome to reuse (durable steps).
      key: undefined,
      error: bare(s.error),
      callAttempts: s.callAttempts?.map((a) => ({ ...a, error: bare(a.error) })),
    })),
  };
}

// Claims runs with a lease, executes them with bounded concurrency, keeps the
// leases alive, and records the outcome. A worker that dies leaves leases
// that expire, and the runs are claimed again (at-least-once).
//
// Claims are a pipeline, as graphile-worker's local queue: one claim at a
// time, started as soon as a slot frees (not when a batch ends), sized to
// the free slots plus a prefetch, whose runs wait here, leased, for the next
// slot. The prefetch is the runs that ended while the last claim was in
// flight (at most `concurrency`): short runs keep enough claimed to cover a
// claim's latency, while long ones (tool and model calls) claim no more than
// they run, so a run claimed here never waits long behind them while another
// worker could have taken it.
//
// A run whose outcome is being recorded takes no slot: its execution is
// over, and the finish waits for a commit (grouped with others, through the
// disk), so holding the slot until then would bound runs/s by concurrency
// over commit latency, not by what runs do. Its lease is kept until the
// outcome is in. At most `concurrency` outcomes are recorded at once: past
// that, a free slot waits for them (a store slow to commit slows claims).
export class Worker {
  // Names the host and process, so that step records and lease owners tell
  // replicas apart.
  readonly owner = `worker-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  readonly #o: Required<Omit<WorkerOptions, "tenantSlug">> & Pick<WorkerOptions, "tenantSlug">;
  readonly #active = new Map<string, { controller: AbortController; done: Promise<void> }>();
  // Claimed runs waiting for a slot, oldest claim first.
  #ready: ClaimedRun[] = [];
  #prefetch = 0;
  // Attempts that ended, counted to size the prefetch.
  #ended = 0;
  #timer?: NodeJS.Timeout;
  // When the idle timer wakes this worker: the next lease expiry as last
  // asked for, or the idle poll (see #sleep).
  #wakeAt?: number;
  #heartbeat?: NodeJS.Timeout;
  #scheduled = false;
  #claiming = false;
  #again = false;
  #stopped = true;
  // When each held run's lease was last extended (claimed or heartbeat): it
  // holds until then + leaseMs.
  readonly #renewed = new Map<string, number>();
  // Held runs done executing, whose outcome is being recorded: a lapsed lease
  // does not abort these (the outcome is written if no one claimed the run
  // meanwhile, and dropped if someone did).
  readonly #recording = new Set<string>();
  // While the store fails (a database outage), claims retry with a growing
  // wait of at most a second, and each loop logs its first failure and its
  // recovery only.
  readonly #claims: FailureStreak;
  readonly #beats: FailureStreak;

  constructor(options: WorkerOptions) {
    this.#o = { idlePollMs: 5000, now: Date.now, observer: NO_OBSERVER, ...options, recordLimits: options.recordLimits ?? DEFAULT_RECORD_LIMITS };
    this.#claims = new FailureStreak(this.#o.log, "run queue claim");
    this.#beats = new FailureStreak(this.#o.log, "lease heartbeat");
  }

  start(): void {
    this.#stopped = false;
    this.#heartbeat = setInterval(() => void this.#beat(), Math.max(50, this.#o.leaseMs / 3));
    this.wake();
  }

  wake(): void {
    if (this.#stopped) return;
    this.#launchReady();
    if (this.#claiming) {
      this.#again = true;
      return;
    }
    // The wake-ups of one event-loop turn (each run of a batch of finishes
    // that committed together frees a slot) make one claim, not one each.
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#claim();
    });
  }

  // Aborts a run executing here, or drops one waiting here (it was cancelled
  // through the API).
  cancel(runId: string): void {
    this.#drop(runId);
    this.#active.get(runId)?.controller.abort(new Error("run cancelled"));
  }

  get active(): number {
    return this.#active.size;
  }

  // Stops claiming, lets running runs finish for up to `graceMs`, then aborts
  // and releases the rest to the queue for another worker.
  async stop(graceMs = DEFAULT_STOP_GRACE_MS): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    const all = () => Promise.all([...this.#active.values()].map((a) => a.done));
    const waiting = this.#ready.splice(0).map((r) => r.id);
    await Promise.race([all(), new Promise((r) => setTimeout(r, graceMs).unref())]);
    const left = [...waiting, ...this.#active.keys()];
    for (const { controller } of this.#active.values()) controller.abort(new Error("worker shutting down"));
    await all();
    clearInterval(this.#heartbeat);
    // A store that is down now: their leases expire instead.
    if (left.length) await this.#o.queue.release(this.owner, left, this.#o.now()).catch((err: unknown) => this.#o.log.warn({ err }, "releasing runs at shutdown failed"));
  }

  // Slots a launch may take now (see the class comment).
  #room(): number {
    return this.#recording.size < this.#o.concurrency ? this.#o.concurrency - (this.#active.size - this.#recording.size) : 0;
  }

  async #claim(): Promise<void> {
    const want = this.#room() + this.#prefetch - this.#ready.length;
    if (want <= 0 || this.#stopped || this.#claiming) return;
    this.#claiming = true;
    this.#again = false;
    clearTimeout(this.#timer);
    const ended = this.#ended;
    try {
      const now = this.#o.now();
      const runs = await this.#o.queue.claim(this.owner, want, this.#o.leaseMs, this.#o.maxAttempts, now, this.#held());
      this.#prefetch = Math.min(this.#o.concurrency, this.#ended - ended);
      if (this.#stopped) {
        // stop() began while claiming: give these back rather than run them unwatched.
        await this.#o.queue.release(this.owner, runs.map((r) => r.id), this.#o.now());
        return;
      }
      for (const run of runs) this.#renewed.set(run.id, now);
      this.#ready.push(...runs);
      this.#launchReady();
      // All it asked for: more may be waiting.
      if (runs.length === want) this.#again = true;
      else if (!this.#again) await this.#sleep();
      this.#claims.succeeded();
    } catch (err) {
      const wait = this.#claims.failed(err);
      if (!this.#stopped) this.#timer = setTimeout(() => this.wake(), wait);
    } finally {
      this.#claiming = false;
      // A wake() that arrived while this claim was in flight must not be lost.
      if (this.#again && !this.#stopped) this.wake();
    }
  }

  // Runs held here: executing, and waiting for a slot.
  #held(): string[] {
    return [...this.#active.keys(), ...this.#ready.map((r) => r.id)];
  }

  #launchReady(): void {
    while (this.#room() > 0 && this.#ready.length && !this.#stopped) this.#launch(this.#ready.shift()!);
  }

  // Forgets a waiting run this worker no longer holds.
  #drop(runId: string): void {
    const at = this.#ready.findIndex((r) => r.id === runId);
    if (at < 0) return;
    this.#ready.splice(at, 1);
    this.#renewed.delete(runId);
  }

  // Sleeps until a dead worker's lease expires, or the idle poll. The next
  // expiry is asked for only once the last answer's time has come: until
  // then no lease can end sooner than it said, since a lease held then only
  // moves later or goes, and one taken since ends a whole lease after the
  // question (the same lease on every worker; another's shorter one waits
  // for this idle poll at most). A claim that comes back short happens
  // after every batch a drained queue hands out: on PostgreSQL, asking each
  // time was a third of this thread's round trips.
  async #sleep(): Promise<void> {
    const asked = this.#o.now();
    if (this.#wakeAt === undefined || this.#wakeAt <= asked) {
      const expiry = await this.#o.queue.nextLeaseExpiry();
      const answered = this.#o.now();
      const due = expiry === undefined ? Infinity : Math.max(answered + 10, expiry + 5);
      this.#wakeAt = Math.min(due, answered + this.#o.idlePollMs, asked + this.#o.leaseMs);
    }
    this.#timer = setTimeout(() => this.wake(), this.#wakeAt - this.#o.now());
  }

  #launch(run: ClaimedRun): void {
    const controller = new AbortController();
    const entry = { controller, done: Promise.resolve() };
    entry.done = traceRun(run, () => this.#execute(run, controller))
      .catch((err: unknown) => this.#o.log.error({ err, run: run.id }, "run attempt ended with an unexpected error; it runs again when its lease expires"))
      .finally(() => {
        // A run that got to recording its outcome was counted as ended then.
        if (!this.#recording.has(run.id)) this.#ended++;
        if (this.#active.get(run.id) === entry) {
          this.#active.delete(run.id);
          this.#renewed.delete(run.id);
          this.#recording.delete(run.id);
        }
        this.wake();
      });
    this.#active.set(run.id, entry);
  }

  async #execute(run: Parameters<Executor["execute"]>[0], controller: AbortController): Promise<void> {
    const { queue, executor, now } = this.#o;
    // Every line of this run carries its ids; the thread's logger adds the thread.
    const log = this.#o.log.child({
      tenant: run.tenantId,
      tenantSlug: await this.#o.tenantSlug?.(run.tenantId),
      run: run.id,
      agent: run.agentId,
      trigger: run.triggerId ?? undefined,
      event: run.eventId ?? undefined,
    });
    log.info({ attempt: run.attempt, worker: this.owner }, "run started");
    const ready = (signal: AbortSignal) => this.#stillHeld(run.id, controller, signal);
    const recorder = new StepRecorder({ queue, owner: this.owner, run, log, now, limits: this.#o.recordLimits, ready });
    const started = performance.now();
    let result: ExecutionResult;
    try {
      result = await executor.execute(run, {
        signal: controller.signal,
        startStep: (step) => recorder.start(step),
        resume: (key) => {
          const outcome = recorder.resume(key);
          if (outcome) this.#o.observer.stepResumed(run.tenantId, outcome.kind);
          return outcome;
        },
      });
    } catch (err) {
      // The store failed under the run (a database outage), not the run:
      // it is given back, and its lease lets it run again if that fails too.
      if (err instanceof StoreUnavailableError) return this.#giveBack(run, controller, log, err);
      result = { status: "failed", error: (err as Error).message };
    }
    const seconds = (performance.now() - started) / 1000;
    // An error quotes what a tool or model answered: its text as recorded, in traces and logs too.
    if (result.status !== "succeeded") result = { ...result, error: recorder.error(result.error) };
    traceOutcome(result);
    // Its slot is free from here (see the class comment).
    this.#recording.add(run.id);
    this.#ended++;
    this.wake();
    await recorder.close(result.status === "succeeded" ? "the run ended before the step did" : result.error);
    let outcome: RunOutcome = {
      status: result.status,
      output: result.status === "succeeded" ? recorder.output(result.output) : undefined,
      error: result.status === "succeeded" ? "" : result.error,
      steps: recorder.steps,
    };
    // The outcome is retried until the store takes it (a full disk, a lock):
    // the run stays held here meanwhile, its lease kept by the heartbeat, so
    // it neither sits in `running` forever nor runs a second time. An outcome
    // the store refuses for good is not retried: the run fails once with
    // `record_rejected` (see rejected()), so it is never claimed again and
    // holds no slot.
    let refused = false;
    for (let attempt = 0; !controller.signal.aborted; attempt++) {
      try {
        const ended = { status: result.status, attempts: run.attempt, durationMs: Math.round(seconds * 1000) };
        const failure = result.status === "succeeded" ? {} : { kind: errorKindOf(result), error: result.error };
        if (!(await queue.finish(this.owner, run.id, outcome, now()))) log.warn({ ...ended, ...failure }, "run ended after it was cancelled or its lease was lost");
        else {
          this.#o.observer.runFinished(run.tenantId, result.status, errorKindOf(result), seconds);
          if (result.status === "succeeded") log.info(ended, "run finished");
          else log.warn({ ...ended, ...failure }, "run finished");
        }
        return;
      } catch (err) {
        if (err instanceof StoreRefusedError) {
          if (refused) {
            log.error({ err }, "the store refused even the bare outcome of the run; leaving it to its lease");
            return;
          }
          log.error({ err }, "the store refused the run's outcome; recording it failed with record_rejected");
          refused = true;
          outcome = rejected(outcome, recorder.error(`record_rejected: the store refused the run's record (${err.message})`));
          result = { status: "failed", error: outcome.error };
          continue;
        }
        if (attempt === 0) log.error({ err }, "recording a run outcome failed; retrying until the store takes it");
        await pause(Math.min(FINISH_RETRY_MAX_MS, FINISH_RETRY_FIRST_MS * 2 ** attempt), controller.signal);
      }
    }
  }

  async #giveBack(run: { id: string }, controller: AbortController, log: Logger, err: unknown): Promise<void> {
    controller.abort(err);
    log.warn({ err: (err as Error).message }, "run given back: the store failed while it executed; it runs again");
    await this.#o.queue.release(this.owner, [run.id], this.#o.now()).catch(() => {
      // Still down: the lease expires instead.
    });
  }

  // Before each try of a step's call goes out (CallTries.ready). A lease
  // renewed two heartbeats ago or longer means this process did not run for
  // a while (a pause, a starved machine): the lease may have lapsed and
  // another worker claimed the run, which executes the step too. So the
  // lease is renewed first, and the attempt aborted, its call not sent, if
  // the run is no longer held here. Otherwise nothing is waited for: a live
  // worker's heartbeat keeps its renewal younger than that. A store that
  // cannot be reached is left to the heartbeat, as in #beat: the call goes
  // out unless the lease has lapsed.
  async #stillHeld(runId: string, controller: AbortController, signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw signal.reason;
    const now = this.#o.now();
    const age = now - (this.#renewed.get(runId) ?? now);
    if (age < (this.#o.leaseMs * 2) / 3) return;
    try {
      const held = await this.#o.queue.heartbeat(this.owner, [runId], this.#o.leaseMs, now);
      if (held.has(runId)) this.#renewed.set(runId, now);
      else controller.abort(new Error("run no longer held by this worker (its lease lapsed, or it was cancelled); the step's call was not sent"));
    } catch {
      if (age >= this.#o.leaseMs) controller.abort(new Error("run lease lapsed while the store was unreachable"));
    }
    if (signal.aborted) throw signal.reason;
  }

  // Extends every held lease; a run no longer held (cancelled) is aborted.
  // While the store cannot be reached, a run whose lease has lapsed is
  // aborted too: another worker may claim it now, and one run must not
  // execute twice at once.
  async #beat(): Promise<void> {
    const ids = this.#held();
    if (!ids.length) return;
    const now = this.#o.now();
    try {
      const held = await this.#o.queue.heartbeat(this.owner, ids, this.#o.leaseMs, now);
      this.#beats.succeeded();
      for (const id of ids) {
        if (held.has(id)) this.#renewed.set(id, now);
        else this.cancel(id);
      }
    } catch (err) {
      this.#beats.failed(err);
      const lapsed = this.#o.now() - this.#o.leaseMs;
      for (const id of ids) {
        const renewed = this.#renewed.get(id);
        if (renewed === undefined || renewed > lapsed || this.#recording.has(id)) continue;
        this.#drop(id);
        this.#active.get(id)?.controller.abort(new Error("run lease lapsed while the store was unreachable"));
      }
    }
  }
}
