import { spawn, type ChildProcess } from "node:child_process";
import { setPriority } from "node:os";
import { FairQueue } from "./fair-queue.js";
import { InlineExpressions } from "./inline.js";
import { processCpuMs } from "./process-cpu.js";
import { sandboxProgram, type Mode, type Outcome, type OverrunKind, type SandboxAnswer, type SandboxTask } from "./sandbox-program.js";

export type { Mode, Outcome, OverrunKind } from "./sandbox-program.js";

export interface SandboxOptions {
  // Sandbox processes evaluating at once.
  workers: number;
  // Nesting and recursion depth of one evaluation (JSONata's own counter).
  maxDepth: number;
  // Longest sequence an expression may build (ranges, mapped arrays, a
  // builtin's array result).
  maxSequence: number;
  // Longest string an expression may build, and largest JSON text it may
  // produce, in every tier (size-guard.ts); past it, `limit`.
  maxChars: number;
  // Heap of each sandbox process; an expression that needs more is cut off.
  memoryMb: number;
  // Jobs one tenant may have waiting; past it, evaluate() refuses at once.
  maxQueuedPerTenant: number;
  // Time slice of a bounded expression evaluated on the service's own thread
  // before it is handed to a sandbox process instead (0: always a process).
  inlineSliceMs: number;
  // Time a tenant's expressions may spend on the service's own thread per
  // second (a token bucket of that size): past it, its bounded expressions
  // queue for the sandbox like the rest, where the fairness rules apply.
  inlineMsPerSecond: number;
  // Grace past an expression's budget before its process is killed (the
  // budget itself is checked between JSONata steps; this catches one step
  // that never returns, like a native sort of a huge array).
  hardKillSlackMs: number;
  // Wall time past which an expression's process is stopped however little
  // CPU it used, as a multiple of its budget plus slack: a process the
  // machine starves holds its slot no longer (outcome `overloaded`).
  wallCeiling: number;
  // Every expression stopped by a budget or limit (for metrics).
  onOverrun?: (mode: Mode, kind: OverrunKind) => void;
  // Where each expression was evaluated (for metrics).
  onPlaced?: (mode: Mode, where: "inline" | "sandbox") => void;
}

// The sandbox processes' scheduling priority (see #start).
const NICE = 10;
// How long a tenant's recent expressions may each have held a process for
// it to take the last free one while no other tenant waits: a filter cut
// off at its budget holds one for longer (50 ms of CPU time and the kill's
// slack), and a tenant arriving then waits this long at most.
const QUICK_UNIT_MS = 40;

export const DEFAULT_SANDBOX: Omit<SandboxOptions, "onOverrun" | "onPlaced"> = {
  workers: 2,
  maxDepth: 500,
  maxSequence: 1_000_000,
  maxChars: 4_194_304,
  memoryMb: 128,
  maxQueuedPerTenant: 1000,
  inlineSliceMs: 5,
  inlineMsPerSecond: 250,
  hardKillSlackMs: 30,
  wallCeiling: 20,
};

// What a caller may learn and decide while its job runs, expression by
// expression (a trigger filter that overran is suspended before the next
// event's evaluation of it comes up).
export interface JobHooks {
  // Called before an expression's turn: true skips it (outcome `skipped`).
  skip?(index: number): boolean;
  // Called as each expression settles, before the job does.
  settled?(index: number, outcome: Outcome): void;
}

export class SandboxBacklogError extends Error {
  override name = "SandboxBacklogError";
}

type Failure = Extract<Outcome, { ok: false }>;
const isOverrun = (o: Outcome): o is Failure & { kind: OverrunKind } =>
  !o.ok && o.kind !== "error" && o.kind !== "skipped" && o.kind !== "overloaded";

const SKIPPED: Outcome = { ok: false, kind: "skipped", message: "not evaluated: no longer wanted" };

interface Job {
  id: number;
  tenant: string;
  mode: Mode;
  input: unknown;
  budgetMs: number;
  // Indexes into `results` still to evaluate, in order.
  pending: { index: number; expression: string }[];
  // Expressions not settled yet (waiting or running).
  unsettled: number;
  results: Outcome[];
  hooks: JobHooks;
  resolve(results: Outcome[]): void;
  reject(err: Error): void;
}

interface Process {
  child: ChildProcess;
  ready: boolean;
}

interface Slot {
  process?: Process;
  running?: { job: Job; index: number; tenant: string };
  // When the expression now running started, in wall time and in its
  // process's CPU time (the budget's clock; undefined without /proc).
  startedAt: number;
  cpuAtStart?: number;
  // The tenant whose expression cost this slot its process: the slot counts
  // against that tenant's share until its replacement is ready, so a tenant
  // that keeps killing processes cannot spill onto the others' slot.
  charged?: string;
}

// Tenant-authored JSONata runs here, never on the event loop that serves
// requests unless it is provably cheap (bounded.ts) and its tenant is within
// its share of that loop's time: in separate processes,
// with a wall-clock budget per expression, a depth and sequence limit, a heap
// limit, and linear-time regular expressions. Processes rather than worker
// threads, because V8 treats some out-of-memory failures as fatal to the
// whole process, and a tenant's expression must never end the service.
//
// Fairness: the unit of work is one expression; tenants with work waiting
// are served round-robin, and no tenant holds more than `workers - 1`
// processes, so with two or more processes one tenant's runaway filters
// never hold up another's, and with several noisy tenants a quiet one waits
// for at most one expression. An expression that overruns is
// cut off and its process replaced by a spare started ahead of need.
export class ExpressionSandbox {
  readonly #o: SandboxOptions;
  readonly #slots: Slot[];
  readonly #waiting: FairQueue<Job>;
  readonly #program: string;
  readonly #inline: InlineExpressions;
  readonly #inlineBuckets = new Map<string, { left: number; at: number }>();
  #spare?: Process;
  #nextId = 1;
  #watchdog?: NodeJS.Timeout;
  #closed = false;

  constructor(options: Partial<SandboxOptions> = {}) {
    this.#o = { ...DEFAULT_SANDBOX, ...options };
    this.#program = sandboxProgram({ maxDepth: this.#o.maxDepth, maxSequence: this.#o.maxSequence, maxChars: this.#o.maxChars });
    this.#inline = new InlineExpressions({ maxChars: this.#o.maxChars, maxItems: this.#o.maxSequence });
    this.#slots = Array.from({ length: Math.max(1, this.#o.workers) }, () => ({ startedAt: 0 }));
    // All processes but one per tenant, so another tenant never waits for
    // this one's expressions; all of them while it is alone and its recent
    // expressions each held a process for less than QUICK_UNIT_MS.
    this.#waiting = new FairQueue(Math.max(1, this.#slots.length - 1), this.#o.maxQueuedPerTenant, QUICK_UNIT_MS);
  }

  // Evaluates each expression on `input` within `budgetMs` each. Filters
  // (`mode: "filter"`) yield true only for a boolean true result. Bounded
  // expressions (the common filter: navigation and comparisons) run here
  // under the inline slice; the rest, and those that overran it, in a
  // sandbox process.
  async evaluate(tenant: string, expressions: string[], input: unknown, budgetMs: number, mode: Mode, hooks: JobHooks = {}): Promise<Outcome[]> {
    const results: Outcome[] = [];
    let pending: Job["pending"] | undefined;
    const slice = Math.min(this.#o.inlineSliceMs, budgetMs);
    const share = slice > 0 ? this.#inlineShare(tenant) : undefined;
    for (let index = 0; index < expressions.length; index++) {
      const expression = expressions[index]!;
      // Asked now as well as at its turn in the queue: a filter suspended
      // after failing here (a size limit) is skipped like one that failed
      // in a process, and one suspended already waits for nothing.
      if (hooks.skip?.(index)) {
        results[index] = SKIPPED;
        hooks.settled?.(index, SKIPPED);
        continue;
      }
      const compiled = share && share.left > 0 ? this.#inline.accepts(expression) : undefined;
      let outcome: Outcome | undefined;
      if (compiled) {
        const started = performance.now();
        outcome = await this.#inline.evaluate(compiled, input, slice, mode);
        share!.left -= performance.now() - started;
      }
      this.#o.onPlaced?.(mode, outcome ? "inline" : "sandbox");
      if (outcome) {
        results[index] = outcome;
        // A size limit is reached inline too (a time slice that ran out is not an overrun: the sandbox takes it).
        if (isOverrun(outcome)) this.#o.onOverrun?.(mode, outcome.kind);
        hooks.settled?.(index, outcome);
      } else (pending ??= []).push({ index, expression });
    }
    if (!pending) return results;
    return this.#enqueue(tenant, { mode, input, budgetMs: Math.max(1, Math.round(budgetMs)), pending, unsettled: pending.length, results, hooks });
  }

  // The tenant's bucket of inline time, refilled to now; callers take what
  // they spend from `left`.
  #inlineShare(tenant: string): { left: number; at: number } {
    const now = performance.now();
    const rate = this.#o.inlineMsPerSecond;
    let bucket = this.#inlineBuckets.get(tenant);
    if (!bucket) {
      if (this.#inlineBuckets.size >= 100_000) this.#inlineBuckets.clear();
      this.#inlineBuckets.set(tenant, (bucket = { left: rate, at: now }));
    }
    bucket.left = Math.min(rate, bucket.left + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    return bucket;
  }

  // Starts the processes ahead of the first expression (they take a moment).
  warm(): void {
    if (this.#closed) return;
    for (const slot of this.#slots) slot.process ??= this.#start();
    this.#spare ??= this.#start();
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#watchdog);
    const closed = new Error("the expression sandbox is closed");
    for (const job of this.#waiting.drain()) job.reject(closed);
    for (const slot of this.#slots) {
      slot.running?.job.reject(closed);
      slot.running = undefined;
      slot.process?.child.kill("SIGKILL");
      slot.process = undefined;
    }
    this.#spare?.child.kill("SIGKILL");
    this.#spare = undefined;
  }

  #enqueue(tenant: string, fields: Omit<Job, "id" | "tenant" | "resolve" | "reject">): Promise<Outcome[]> {
    if (this.#closed) return Promise.reject(new Error("the expression sandbox is closed"));
    return new Promise((resolve, reject) => {
      if (!this.#waiting.push(tenant, { id: this.#nextId++, tenant, ...fields, resolve, reject }))
        return reject(new SandboxBacklogError(`tenant has ${this.#o.maxQueuedPerTenant} expression evaluations waiting, the limit`));
      this.#dispatch();
    });
  }

  // The next expression to run, fairly; one whose caller no longer wants it
  // is settled as skipped.
  #next(): { job: Job; index: number; expression: string } | undefined {
    for (;;) {
      const next = this.#waiting.next((job) => ({ unit: job.pending.shift()!, more: job.pending.length > 0 }));
      if (!next) return undefined;
      const { job, unit } = next;
      if (!job.hooks.skip?.(unit.index)) return { job, ...unit };
      this.#settle(job, unit.index, SKIPPED);
    }
  }

  #dispatch(): void {
    if (this.#closed) return;
    // Every idle slot gets a process, and every ready replacement frees its
    // tenant's charge, before anything is picked: the loop below stops at
    // the first idle slot with nothing to run, and a charge left on a later
    // slot would keep its tenant over its share with nothing left to free it.
    for (const slot of this.#slots) {
      if (slot.running) continue;
      slot.process ??= this.#spare ?? this.#start();
      if (slot.process === this.#spare) this.#spare = undefined;
      if (slot.process.ready && slot.charged !== undefined) {
        // Its expression's time and the replacement's start are the tenant's.
        this.#waiting.release(slot.charged, Date.now() - slot.startedAt);
        slot.charged = undefined;
      }
    }
    for (const slot of this.#slots) {
      // A process not ready yet dispatches again once it has started.
      if (slot.running || !slot.process?.ready) continue;
      const next = this.#next();
      if (!next) break;
      const { job, index, expression } = next;
      slot.running = { job, index, tenant: job.tenant };
      this.#waiting.hold(job.tenant);
      slot.startedAt = Date.now();
      slot.cpuAtStart = processCpuMs(slot.process.child.pid);
      const task: SandboxTask = { id: job.id, index, mode: job.mode, expression, input: job.input, budgetMs: job.budgetMs };
      slot.process.child.send(task);
    }
    if (!this.#waiting.empty) this.#spare ??= this.#start();
    this.#watch();
  }

  #start(): Process {
    const child = spawn(process.execPath, [`--max-old-space-size=${this.#o.memoryMb}`, "--stack-size=2000", "-e", this.#program], {
      // A tenant's expression must not be able to write to the service's logs
      // (V8 prints its out-of-memory report to stderr).
      stdio: ["ignore", "ignore", "ignore", "ipc"],
      serialization: "advanced",
      // Not the service's NODE_OPTIONS (a test runner's loaders, inspectors).
      env: { ...process.env, NODE_OPTIONS: "" },
    });
    // Tenant code yields the CPU to the service, but is not starved by it:
    // at nice 19 a busy service thread left a sandbox process 1.5 % of a core
    // (weights 15 to 1024), so on a loaded machine ordinary expressions hit
    // the wall ceiling with a fraction of their CPU budget used and failed;
    // at nice 10 it keeps about a tenth, and its budget bounds it anyway.
    if (child.pid !== undefined) setPriority(child.pid, NICE);
    child.unref();
    child.channel?.unref();
    const proc: Process = { child, ready: false };
    child.on("message", (m: SandboxAnswer | { ready: true }) => {
      if ("ready" in m) {
        proc.ready = true;
        this.#dispatch();
        return;
      }
      const slot = this.#slots.find((s) => s.process === proc);
      if (slot) this.#answered(slot, m);
    });
    // V8 aborts when the heap limit is reached (SIGABRT), and traps when one
    // allocation passes its largest array or string (SIGTRAP, SIGILL on some
    // builds, "Fatal JavaScript invalid size error"): both are the
    // expression's size, deterministic for the same expression and input,
    // so they fail it as such. Anything else is a crash or our kill.
    child.on("exit", (code, signal) => {
      const memory = signal === "SIGABRT" || signal === "SIGTRAP" || signal === "SIGILL" || code === 134 || code === 133 || code === 132;
      this.#lost(proc, memory ? "memory" : "error", memory ? "evaluation ran out of memory or past V8's size limits" : `the expression process stopped (${signal ?? code})`);
    });
    child.on("error", () => this.#lost(proc, "error", "the expression process could not run"));
    return proc;
  }

  #settle(job: Job, index: number, outcome: Outcome): void {
    job.results[index] = outcome;
    if (isOverrun(outcome)) this.#o.onOverrun?.(job.mode, outcome.kind);
    job.hooks.settled?.(index, outcome);
    if (--job.unsettled === 0) job.resolve(job.results);
  }

  #release(slot: Slot): void {
    this.#waiting.release(slot.running!.tenant, Date.now() - slot.startedAt);
    slot.running = undefined;
  }

  #answered(slot: Slot, answer: SandboxAnswer): void {
    const running = slot.running;
    if (!running || running.job.id !== answer.id || running.index !== answer.index) return;
    this.#release(slot);
    this.#settle(running.job, answer.index, answer.outcome);
    this.#dispatch();
  }

  // A process died or was cut off: the expression it was running is to blame;
  // its slot takes a spare.
  #lost(proc: Process, kind: Failure["kind"], message: string): void {
    if (this.#spare === proc) this.#spare = undefined;
    const slot = this.#slots.find((s) => s.process === proc);
    if (!slot) return;
    slot.process = undefined;
    const running = slot.running;
    if (running) {
      // The charge moves from the expression to the slot's replacement.
      slot.running = undefined;
      slot.charged = running.tenant;
      if (!this.#closed) this.#settle(running.job, running.index, { ok: false, kind, message });
    }
    this.#dispatch();
  }

  // While anything runs, checks every few milliseconds that no expression is
  // past its budget plus slack; one that is loses its process. The budget is
  // the CPU time its process used, so a loaded machine does not cut off an
  // expression that waited for a core; a process that computes nothing (a
  // stopped one) is still stopped at `wallCeiling` times its budget.
  // Without /proc, wall time is the budget's clock.
  #watch(): void {
    if (!this.#slots.some((s) => s.running)) {
      clearInterval(this.#watchdog);
      this.#watchdog = undefined;
      return;
    }
    this.#watchdog ??= setInterval(() => {
      const now = Date.now();
      for (const slot of this.#slots) {
        const { running, process: proc } = slot;
        if (!running || !proc) continue;
        const cpu = slot.cpuAtStart === undefined ? undefined : processCpuMs(proc.child.pid);
        const wall = now - slot.startedAt;
        const used = cpu === undefined ? wall : cpu - slot.cpuAtStart!;
        const limit = running.job.budgetMs + this.#o.hardKillSlackMs;
        if (used <= limit && wall <= limit * this.#o.wallCeiling) continue;
        proc.child.kill("SIGKILL");
        // What it used says which clock stopped it (operators read it in a
        // trigger's filter error or a run's error). Stopped by the wall
        // ceiling with its CPU budget unspent, it did not overrun: the
        // machine left it too little of a core.
        if (cpu !== undefined && used <= limit)
          this.#lost(proc, "overloaded", `evaluation was stopped after ${wall} ms with ${used} ms of its ${running.job.budgetMs} ms CPU budget used: the service is overloaded`);
        else {
          const spent = cpu === undefined ? `${wall} ms` : `${used} ms of CPU time in ${wall} ms`;
          this.#lost(proc, "timeout", `evaluation exceeded its ${running.job.budgetMs} ms budget and was stopped (it used ${spent})`);
        }
      }
      if (!this.#slots.some((s) => s.running)) this.#watch();
    }, 10);
    this.#watchdog.unref();
  }
}
