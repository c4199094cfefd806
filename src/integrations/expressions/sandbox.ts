import { spawn, type ChildProcess } from "node:child_process";
import { InlineExpressions } from "./inline.js";
import { sandboxProgram, type Outcome, type OverrunKind, type SandboxAnswer, type SandboxJob } from "./sandbox-program.js";

export type { Outcome, OverrunKind } from "./sandbox-program.js";

export interface SandboxOptions {
  // Sandbox processes evaluating at once.
  workers: number;
  // Nesting and recursion depth of one evaluation (JSONata's own counter).
  maxDepth: number;
  // Longest sequence an expression may build (ranges, mapped arrays).
  maxSequence: number;
  // Heap of each sandbox process; an expression that needs more is cut off.
  memoryMb: number;
  // Jobs one tenant may have waiting; past it, evaluate() refuses at once.
  maxQueuedPerTenant: number;
  // Time slice of a bounded expression evaluated on the service's own thread
  // before it is handed to a sandbox process instead (0: always a process).
  inlineSliceMs: number;
  // Grace past an expression's budget before its process is killed (the
  // budget itself is checked between JSONata steps; this catches one step
  // that never returns, like a native sort of a huge array).
  hardKillSlackMs: number;
  // Every expression stopped by a budget or limit (for metrics).
  onOverrun?: (mode: SandboxJob["mode"], kind: OverrunKind) => void;
}

export const DEFAULT_SANDBOX: Omit<SandboxOptions, "onOverrun"> = {
  workers: 2,
  maxDepth: 500,
  maxSequence: 1_000_000,
  memoryMb: 128,
  maxQueuedPerTenant: 1000,
  inlineSliceMs: 5,
  hardKillSlackMs: 50,
};

export class SandboxBacklogError extends Error {
  override name = "SandboxBacklogError";
}

type Failure = Extract<Outcome, { ok: false }>;

interface PendingJob {
  tenant: string;
  job: SandboxJob;
  results: Outcome[];
  resolve(results: Outcome[]): void;
  reject(err: Error): void;
}

interface Slot {
  child?: ChildProcess;
  ready: boolean;
  running?: PendingJob;
  // When the expression now running started (its budget's clock).
  startedAt: number;
}

// Tenant-authored JSONata runs here, never on the event loop that serves
// requests: in separate processes, with a wall-clock budget per expression, a
// depth and sequence limit, a heap limit, and linear-time regular
// expressions. Processes rather than worker threads, because V8 treats some
// out-of-memory failures as fatal to the whole process, and a tenant's
// expression must never be able to end the service. An expression that
// overruns is cut off (its process is replaced), and waiting jobs are taken
// round-robin across tenants, so one tenant's heavy filters delay another
// tenant's by at most one budget.
export class ExpressionSandbox {
  readonly #o: SandboxOptions;
  readonly #slots: Slot[];
  readonly #queues = new Map<string, PendingJob[]>();
  // Tenants with waiting jobs, in the order they are served.
  readonly #rotation: string[] = [];
  readonly #program: string;
  readonly #inline: InlineExpressions;
  #nextId = 1;
  #watchdog?: NodeJS.Timeout;
  #closed = false;

  constructor(options: Partial<SandboxOptions> = {}) {
    this.#o = { ...DEFAULT_SANDBOX, ...options };
    this.#program = sandboxProgram({ maxDepth: this.#o.maxDepth, maxSequence: this.#o.maxSequence });
    this.#inline = new InlineExpressions(this.#o.maxDepth, this.#o.maxSequence);
    this.#slots = Array.from({ length: Math.max(1, this.#o.workers) }, () => ({ ready: false, startedAt: 0 }));
  }

  // Evaluates each expression on `input` within `budgetMs` each. Filters
  // (`mode: "filter"`) yield true only for a boolean true result. Bounded
  // expressions (the common filter: navigation and comparisons) run here
  // under the inline slice; the rest, and those that overran it, in a
  // sandbox process.
  async evaluate(tenant: string, expressions: string[], input: unknown, budgetMs: number, mode: SandboxJob["mode"]): Promise<Outcome[]> {
    const results: (Outcome | undefined)[] = [];
    const slice = Math.min(this.#o.inlineSliceMs, budgetMs);
    for (const [i, source] of expressions.entries()) {
      const compiled = slice > 0 ? this.#inline.accepts(source) : undefined;
      if (compiled) results[i] = await this.#inline.evaluate(source, compiled, input, slice, mode);
    }
    const rest = expressions.flatMap((source, i) => (results[i] ? [] : [{ source, i }]));
    if (rest.length) {
      const outcomes = await this.#isolated(tenant, rest.map((r) => r.source), input, budgetMs, mode);
      rest.forEach(({ i }, k) => (results[i] = outcomes[k]));
    }
    return results as Outcome[];
  }

  #isolated(tenant: string, expressions: string[], input: unknown, budgetMs: number, mode: SandboxJob["mode"]): Promise<Outcome[]> {
    if (this.#closed) return Promise.reject(new Error("the expression sandbox is closed"));
    if (expressions.length === 0) return Promise.resolve([]);
    let queue = this.#queues.get(tenant);
    if (queue && queue.length >= this.#o.maxQueuedPerTenant)
      return Promise.reject(new SandboxBacklogError(`tenant has ${queue.length} expression evaluations waiting, the limit`));
    return new Promise((resolve, reject) => {
      const job: SandboxJob = { id: this.#nextId++, mode, expressions, from: 0, input, budgetMs: Math.max(1, Math.round(budgetMs)) };
      if (!queue) this.#queues.set(tenant, (queue = []));
      if (queue.length === 0) this.#rotation.push(tenant);
      queue.push({ tenant, job, results: [], resolve, reject });
      this.#dispatch();
    });
  }

  // Starts the processes ahead of the first expression (they take a moment).
  warm(): void {
    if (!this.#closed) for (const slot of this.#slots) this.#childOf(slot);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#watchdog);
    const closed = new Error("the expression sandbox is closed");
    for (const queue of this.#queues.values()) for (const p of queue) p.reject(closed);
    this.#queues.clear();
    this.#rotation.length = 0;
    for (const slot of this.#slots) {
      slot.running?.reject(closed);
      slot.running = undefined;
      slot.child?.kill("SIGKILL");
      slot.child = undefined;
    }
  }

  #next(): PendingJob | undefined {
    const tenant = this.#rotation.shift();
    if (tenant === undefined) return undefined;
    const queue = this.#queues.get(tenant)!;
    const pending = queue.shift()!;
    if (queue.length) this.#rotation.push(tenant);
    else this.#queues.delete(tenant);
    return pending;
  }

  #dispatch(): void {
    if (this.#closed) return;
    for (const slot of this.#slots) {
      if (slot.running) continue;
      const child = this.#childOf(slot);
      if (!slot.ready) continue; // it asks again once it has started
      const pending = this.#next();
      if (!pending) break;
      slot.running = pending;
      slot.startedAt = Date.now();
      child.send(pending.job);
    }
    this.#watch();
  }

  #childOf(slot: Slot): ChildProcess {
    if (slot.child) return slot.child;
    const child = spawn(process.execPath, [`--max-old-space-size=${this.#o.memoryMb}`, "--stack-size=2000", "-e", this.#program], {
      // A tenant's expression must not be able to write to the service's logs
      // (V8 prints its out-of-memory report to stderr).
      stdio: ["ignore", "ignore", "ignore", "ipc"],
      serialization: "advanced",
      // Not the service's NODE_OPTIONS (a test runner's loaders, inspectors).
      env: { ...process.env, NODE_OPTIONS: "" },
    });
    child.unref();
    child.channel?.unref();
    slot.child = child;
    slot.ready = false;
    child.on("message", (m: SandboxAnswer | { ready: true }) => {
      if (slot.child !== child) return;
      if ("ready" in m) {
        slot.ready = true;
        this.#dispatch();
      } else this.#answered(slot, m);
    });
    // Out of memory, a crash or a kill: the expression it was running is to blame.
    child.on("exit", (code, signal) => {
      // V8 aborts when the heap limit is reached.
      const kind = signal === "SIGABRT" || code === 134 ? "memory" : "error";
      this.#lost(slot, child, kind, kind === "memory" ? "evaluation ran out of memory" : `the expression process stopped (${signal ?? code})`);
    });
    child.on("error", () => this.#lost(slot, child, "error", "the expression process could not run"));
    return child;
  }

  #answered(slot: Slot, answer: SandboxAnswer): void {
    const pending = slot.running;
    if (!pending || pending.job.id !== answer.id) return;
    pending.results[answer.index] = answer.outcome;
    this.#count(pending.job.mode, answer.outcome);
    slot.startedAt = Date.now();
    if (answer.index < pending.job.expressions.length - 1) return;
    slot.running = undefined;
    pending.resolve(pending.results);
    this.#dispatch();
  }

  #count(mode: SandboxJob["mode"], outcome: Outcome): void {
    if (!outcome.ok && outcome.kind !== "error") this.#o.onOverrun?.(mode, outcome.kind);
  }

  // The process died or was cut off while running `slot.running`: the
  // expression it was on gets the blame, the rest of the job waits again.
  #lost(slot: Slot, child: ChildProcess, kind: Failure["kind"], message: string): void {
    if (slot.child !== child) return;
    slot.child = undefined;
    slot.ready = false;
    const pending = slot.running;
    slot.running = undefined;
    if (pending && !this.#closed) {
      const index = pending.results.length;
      pending.results[index] = { ok: false, kind, message };
      this.#count(pending.job.mode, pending.results[index]);
      if (index + 1 < pending.job.expressions.length) {
        pending.job = { ...pending.job, from: index + 1 };
        const queue = this.#queues.get(pending.tenant);
        if (queue) queue.unshift(pending);
        else {
          this.#queues.set(pending.tenant, [pending]);
          this.#rotation.unshift(pending.tenant);
        }
      } else pending.resolve(pending.results);
    }
    this.#dispatch();
  }

  // While anything runs, checks every few milliseconds that no expression is
  // past its budget plus slack; one that is loses its process.
  #watch(): void {
    if (!this.#slots.some((s) => s.running)) {
      clearInterval(this.#watchdog);
      this.#watchdog = undefined;
      return;
    }
    this.#watchdog ??= setInterval(() => {
      const now = Date.now();
      for (const slot of this.#slots) {
        const { running: pending, child } = slot;
        if (!pending || !child || now - slot.startedAt <= pending.job.budgetMs + this.#o.hardKillSlackMs) continue;
        this.#lost(slot, child, "timeout", `evaluation exceeded its ${pending.job.budgetMs} ms budget and was stopped`);
        child.kill("SIGKILL");
      }
      if (!this.#slots.some((s) => s.running)) this.#watch();
    }, 10);
    this.#watchdog.unref();
  }
}
