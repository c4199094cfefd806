// Capacity under an open-loop load: the highest rate a server sustains, found
// by paced steps. A step offers `rate` requests/s for `seconds`, from the
// generator's own process (`paced-process.ts`), timed from each request's
// scheduled send; it passes when every request was answered with the expected
// status and the p99 stayed within the latency objective. Rates double from
// `start` until a rate fails twice in a row, then bisect between the last
// pass and that failure. A closed loop of N connections would slow down with
// the server and report its rate at whatever latency N implies; this reports
// the rate at a stated latency.
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { nonNegativeInt, positiveInt } from "./env.js";
import type { PacedTarget, StepRequest, StepResult } from "./paced-process.js";
import { ownChild } from "./run.js";
import { sleep } from "./serve.js";
import { mean } from "./stats.js";
import { printTable } from "./table.js";

const CHILD = fileURLToPath(new URL("./paced-process.js", import.meta.url));

export interface CapacityOptions {
  // First rate tried, requests/s.
  start: number;
  // The p99 a passing step stays within, ms.
  sloMs: number;
  seconds: number;
  // Halvings of the bracket once a step failed: the result is within
  // (first failure - last pass) / 2^bisections of the true capacity.
  bisections: number;
  // The status every answer must have.
  status: string;
  // A pause between steps, so one step's backlog (a checkpoint, a commit
  // still running) is not charged to the next.
  pauseMs: number;
  // No rate above this is tried (the generator's own ceiling).
  maxRate: number;
}

export interface Step extends StepResult {
  passed: boolean;
  // Why it failed, for the log.
  reason?: string;
}

export interface Capacity {
  // The highest passing rate (0 when none passed), and every step run.
  rate: number;
  steps: Step[];
  // The passing step at `rate`, for its latencies.
  best?: Step;
  // The generator's highest CPU share in a step (1 = one core).
  generatorCpu: number;
}

// A step's requests each end answered or failed (the generator waits for
// every one), so with no error and no other status, all were answered.
function judge(r: StepResult, opts: CapacityOptions): Step {
  const other = Object.entries(r.statuses).filter(([code]) => code !== opts.status);
  const reason =
    r.errors > 0
      ? `${r.errors} of ${r.sent} requests without an answer`
      : other.length
        ? `answered ${other.map(([c, n]) => `${c}×${n}`).join(", ")}`
        : r.p99 > opts.sloMs
          ? `p99 ${r.p99.toFixed(1)} ms > ${opts.sloMs} ms`
          : undefined;
  return { ...r, passed: reason === undefined, ...(reason && { reason }) };
}

// A generator process for one target; steps run one at a time.
export class PacedGenerator {
  private constructor(private readonly child: ChildProcess) {}

  static async start(target: PacedTarget, env?: Record<string, string>): Promise<PacedGenerator> {
    const child = ownChild(fork(CHILD, [], { env: { ...process.env, ...env }, stdio: ["ignore", "inherit", "inherit", "ipc"] }));
    // A failed send is reported to its caller (below); without a listener
    // the channel's own error would end this process before any clean-up.
    child.on("error", () => undefined);
    const generator = new PacedGenerator(child);
    await generator.#ask(target, "before it was ready");
    return generator;
  }

  step(request: StepRequest): Promise<StepResult> {
    return this.#ask(request, "during a step");
  }

  // Sends one message and resolves with the child's answer; rejects when the
  // child is gone or goes before answering.
  #ask<T>(message: unknown, when: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const exit = (code: number | null) => {
        this.child.off("message", answer);
        reject(new Error(`the load generator exited (${code}) ${when}`));
      };
      const answer = (r: T) => {
        this.child.off("exit", exit);
        resolve(r);
      };
      if (!this.child.connected) return reject(new Error(`the load generator is gone ${when}`));
      this.child.once("exit", exit);
      this.child.once("message", answer);
      this.child.send(message as object, (err) => {
        if (!err) return;
        this.child.off("exit", exit);
        this.child.off("message", answer);
        reject(new Error(`the load generator could not be reached ${when}: ${err.message}`));
      });
    });
  }

  close(): void {
    if (this.child.connected) this.child.disconnect();
  }
}

// `log` sees each step as it ends.
export async function findCapacity(gen: PacedGenerator, opts: CapacityOptions, log: (s: Step) => void): Promise<Capacity> {
  const steps: Step[] = [];
  const once = async (rate: number): Promise<Step> => {
    if (steps.length) await sleep(opts.pauseMs);
    const s = judge(await gen.step({ rate: Math.round(rate), seconds: opts.seconds }), opts);
    steps.push(s);
    log(s);
    return s;
  };
  // A failed rate is offered once more before it counts as failed: one
  // stall in a step (a commit's fsync that takes up to a second on a shared
  // disk) would otherwise cap the search below a rate the server keeps up
  // with, since it never goes back above a failure.
  const run = async (rate: number): Promise<Step> => {
    const s = await once(rate);
    return s.passed ? s : once(rate);
  };
  let pass: Step | undefined;
  let fail: number | undefined;
  for (let rate = opts.start; fail === undefined && rate <= opts.maxRate; rate *= 2) {
    const s = await run(rate);
    if (s.passed) pass = s;
    else fail = rate;
  }
  if (fail !== undefined)
    for (let i = 0; i < opts.bisections; i++) {
      const lo = pass?.rate ?? 0;
      const mid = Math.round((lo + fail) / 2);
      // Steps are whole requests/s: a bracket this narrow is as close as it gets.
      if (mid <= lo || mid >= fail) break;
      const s = await run(mid);
      if (s.passed) pass = s;
      else fail = s.rate;
    }
  return { rate: pass?.rate ?? 0, steps, ...(pass && { best: pass }), generatorCpu: Math.max(0, ...steps.map((s) => s.cpu)) };
}

// BENCH_STEP_SECONDS (5), BENCH_SLO_MS (500), BENCH_START_RATE (1000),
// BENCH_BISECTIONS (4), BENCH_SOCKETS (256). The default objective tells a
// server that keeps up from one that falls behind: 10 % over its capacity
// for a 5 s step leaves a backlog of half a second. A tighter one measures
// the disk: on a shared VM a commit's fsync stalls now and then for 50-400
// ms whatever the rate (bench/README), and every acknowledgement waits for
// one.
export function capacitySettingsFromEnv(): CapacityOptions & { sockets: number } {
  const settings = {
    seconds: positiveInt("BENCH_STEP_SECONDS", 5),
    sloMs: positiveInt("BENCH_SLO_MS", 500),
    start: positiveInt("BENCH_START_RATE", 1000),
    bisections: nonNegativeInt("BENCH_BISECTIONS", 4),
    sockets: positiveInt("BENCH_SOCKETS", 256),
    status: "202",
    pauseMs: 1000,
    maxRate: 64_000,
  };
  if (settings.start > settings.maxRate) throw new Error(`BENCH_START_RATE must be at most ${settings.maxRate}, got ${settings.start}`);
  return settings;
}

export const describeCapacity = (o: CapacityOptions & { sockets: number }): string =>
  `open-loop paced steps of ${o.seconds} s from a generator process of its own (at most ${o.sockets} sockets), ` +
  `latency from each request's scheduled send; a step passes when every request is answered ${o.status} with p99 <= ${o.sloMs} ms; ` +
  `a failed step is offered once more before its rate counts as failed; rates double from ${o.start}/s to the first failed rate, then ${o.bisections} bisections`;

export interface CapacityTarget {
  name: string;
  paced: Omit<PacedTarget, "sockets">;
  // The generator process's environment (what a `rewrite` module reads).
  env?: Record<string, string>;
  // Called before each of its searches (and its warm-up): tracing on or off.
  prepare?: () => Promise<void>;
}

export interface CapacitySummary {
  name: string;
  // Mean of the searches' capacities, and each.
  rate: number;
  runs: number[];
  // Means of the latencies at each search's highest passing step.
  p50: number;
  p99: number;
  generatorCpu: number;
  // Over every step, warm-up included: requests sent, and those answered
  // with the expected status.
  sent: number;
  answered: number;
}

// One capacity as a share of another; NaN (never "met") when the other
// passed no step.
export const ratioOf = (a: CapacitySummary, b: CapacitySummary): number => (b.rate > 0 ? a.rate / b.rate : NaN);

// A warm-up step per target, then `rounds` searches each, in the targets'
// order and back again in turn: with two rounds every target runs once in
// each half and the mean position of its searches is the same, so a steady
// drift (the machine, the databases growing) favours none.
export async function compareCapacities(
  targets: CapacityTarget[],
  opts: CapacityOptions & { sockets: number },
  warmup: { rate: number; seconds: number },
  rounds = 2,
): Promise<CapacitySummary[]> {
  const generators = new Map<CapacityTarget, PacedGenerator>();
  try {
    for (const t of targets) generators.set(t, await PacedGenerator.start({ ...t.paced, sockets: opts.sockets }, t.env));
    const sent = new Map<CapacityTarget, number>(targets.map((t) => [t, 0]));
    const answered = new Map<CapacityTarget, number>(targets.map((t) => [t, 0]));
    const count = (t: CapacityTarget, s: StepResult) => {
      sent.set(t, sent.get(t)! + s.sent);
      answered.set(t, answered.get(t)! + (s.statuses[opts.status] ?? 0));
    };
    for (const t of targets) {
      await t.prepare?.();
      process.stdout.write(`warm-up ${t.name}: ${warmup.rate}/s for ${warmup.seconds} s ... `);
      const s = judge(await generators.get(t)!.step(warmup), { ...opts, sloMs: Infinity });
      count(t, s);
      if (!s.passed) throw new Error(`${t.name}: the warm-up failed: ${s.reason}`);
      console.log(`p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms`);
    }
    const found = new Map<CapacityTarget, Capacity[]>(targets.map((t) => [t, []]));
    const order = Array.from({ length: rounds }, (_, i) => (i % 2 === 0 ? targets : [...targets].reverse())).flat();
    for (const [i, t] of order.entries()) {
      await t.prepare?.();
      console.log(`search ${i + 1}/${order.length} ${t.name}:`);
      const c = await findCapacity(generators.get(t)!, opts, (s) => {
        count(t, s);
        console.log(
          `  ${String(s.rate).padStart(6)}/s  p50 ${s.p50.toFixed(1).padStart(7)} ms  p99 ${s.p99.toFixed(1).padStart(7)} ms  ` +
            `generator CPU ${(s.cpu * 100).toFixed(0).padStart(3)} %  ${s.passed ? "pass" : `FAIL: ${s.reason}`}`,
        );
      });
      console.log(`  => ${c.rate}/s`);
      found.get(t)!.push(c);
    }
    return targets.map((t) => {
      const cs = found.get(t)!;
      const bests = cs.map((c) => c.best).filter((b): b is Step => b !== undefined);
      return {
        name: t.name,
        rate: mean(cs.map((c) => c.rate)),
        runs: cs.map((c) => c.rate),
        p50: bests.length ? mean(bests.map((b) => b.p50)) : NaN,
        p99: bests.length ? mean(bests.map((b) => b.p99)) : NaN,
        generatorCpu: Math.max(0, ...cs.map((c) => c.generatorCpu)),
        sent: sent.get(t)!,
        answered: answered.get(t)!,
      };
    });
  } finally {
    for (const g of generators.values()) g.close();
  }
}

export function printCapacityTable(rows: CapacitySummary[], subject: string, unit: string): void {
  printTable(
    [subject, `${unit} sustained (mean)`, `searches (${unit})`, "p50 (ms)", "p99 (ms)", "generator CPU (max)", "answered total"],
    rows.map((r) => [
      r.name,
      r.rate.toFixed(0),
      r.runs.map((x) => x.toFixed(0)).join(" / "),
      r.p50.toFixed(1),
      r.p99.toFixed(1),
      `${(r.generatorCpu * 100).toFixed(0)} %`,
      String(r.answered),
    ]),
  );
}
