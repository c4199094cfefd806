// The worker against a store that stops answering (issue 19 item 6): it
// keeps trying, logs each loop's failure once and its recovery once, aborts
// a run whose lease lapsed while it could not renew it (another worker may
// claim it), and gives back, rather than fails, a run whose executor met the
// unavailable store. The queue is a stand-in whose calls fail while `down`.
import { Worker } from "../src/runtime/worker.js";
import type { ExecutionContext, Executor, StepHandle } from "../src/runtime/executor.js";
import { StoreUnavailableError } from "../src/store/errors.js";
import type { RunRow } from "../src/store/rows.js";
import type { RunQueue } from "../src/store/store.js";
import { LogCapture } from "./support/log-capture.js";
import { waitFor } from "./support/wait.js";

const LEASE_MS = 300;

function run(id: string): RunRow {
  return {
    id,
    tenantId: "ten_1",
    agentId: "agt_1",
    triggerId: null,
    eventId: null,
    input: {},
    status: "running",
    attempt: 1,
    steps: [],
    output: null,
    error: "",
    startTime: 0,
    endTime: null,
    leaseOwner: "w",
    leaseExpireTime: 0,
    traceParent: null,
    createTime: 0,
    updateTime: 0,
  } as RunRow;
}

// A queue that hands out `runs` once; every call fails while `state.down`;
// a heartbeat finds none of them held once `state.held` is false.
function flakyQueue(runs: RunRow[], state: { down: boolean; held?: boolean }) {
  const calls = { claim: 0, heartbeats: 0, released: [] as string[], finished: [] as string[] };
  const guard = <T>(value: () => T): Promise<T> => (state.down ? Promise.reject(new StoreUnavailableError("connect ECONNREFUSED")) : Promise.resolve(value()));
  const queue: RunQueue = {
    claim: () => guard(() => (calls.claim++ === 0 ? runs : [])),
    heartbeat: (_owner, ids) => (calls.heartbeats++, guard(() => new Set(state.held === false ? [] : ids))),
    recordSteps: () => guard(() => true),
    finish: (_owner, id) => guard(() => (calls.finished.push(id), true)),
    release: (_owner, ids) => guard(() => void calls.released.push(...ids)),
    cancel: () => guard(() => undefined),
    nextLeaseExpiry: () => guard(() => undefined),
    insertMany: () => guard(() => true),
  };
  return { queue, calls };
}

describe("the worker during a store outage", () => {
  it("aborts a run whose lease lapsed while the store was down, and logs each loop's failure and recovery once", async () => {
    const state = { down: false };
    const { queue } = flakyQueue([run("run_a")], state);
    const log = new LogCapture("warn");
    let reason: unknown;
    let markStarted!: () => void;
    const started = new Promise<void>((resolve) => (markStarted = resolve));
    const executor: Executor = {
      execute: (_run, ctx) =>
        new Promise((resolve) => {
          markStarted();
          ctx.signal.addEventListener("abort", () => {
            reason = ctx.signal.reason;
            resolve({ status: "failed", error: "aborted" });
          });
        }),
    };
    const worker = new Worker({ queue, executor, log: log.logger, concurrency: 2, leaseMs: LEASE_MS, maxAttempts: 3, idlePollMs: 50 });
    worker.start();
    await started;
    state.down = true;
    await waitFor("the run to be aborted", 10_000, () => (reason !== undefined ? true : undefined));
    expect((reason as Error).message).toMatch(/lease lapsed/);
    // Many failed tries by now (claims every ≤ 1 s, heartbeats every lease/3): one line each.
    await waitFor("a claim to fail", 10_000, () => log.find("run queue claim failed; retrying until it works (logged again when it does)")[0]);
    state.down = false;
    await log.next("run queue claim works again");
    await worker.stop(0);
    expect(log.find("run queue claim failed; retrying until it works (logged again when it does)")).toHaveLength(1);
    expect(log.find("lease heartbeat failed; retrying until it works (logged again when it does)")).toHaveLength(1);
  });

  it("gives back a run whose executor met the unavailable store instead of recording it as failed", async () => {
    const state = { down: false };
    const { queue, calls } = flakyQueue([run("run_b")], state);
    const log = new LogCapture("warn");
    const executor: Executor = { execute: () => Promise.reject(new StoreUnavailableError("connect ECONNREFUSED")) };
    const worker = new Worker({ queue, executor, log: log.logger, concurrency: 2, leaseMs: LEASE_MS, maxAttempts: 3, idlePollMs: 50 });
    worker.start();
    await waitFor("the run to be released", 10_000, () => (calls.released.includes("run_b") ? true : undefined));
    await worker.stop(0);
    expect(calls.finished).toEqual([]);
  });
});

// Before each try of a step's call (CallTries.ready), a worker whose last
// renewal of the run's lease is two heartbeats old or more (it was stalled)
// confirms the lease first. Its clock is stepped here; the lease (60 s) keeps
// its own heartbeat (every 20 s) out of the test.
describe("the lease check before a step's call", () => {
  const lease = 60_000;

  function setup(heldHere: boolean) {
    const state = { down: false, held: heldHere, t: 1_000_000 };
    const { queue, calls } = flakyQueue([run("run_s")], state);
    let context!: (ctx: ExecutionContext) => void;
    const started = new Promise<ExecutionContext>((resolve) => (context = resolve));
    const executor: Executor = {
      execute: (_run, ctx) =>
        new Promise((resolve) => {
          context(ctx);
          ctx.signal.addEventListener("abort", () => resolve({ status: "failed", error: "aborted" }));
        }),
    };
    const worker = new Worker({ queue, executor, log: new LogCapture("error").logger, concurrency: 1, leaseMs: lease, maxAttempts: 3, idlePollMs: 600_000, now: () => state.t });
    worker.start();
    // The step's call at `offset` past the claim: it may go out, after `heartbeats` heartbeats in all.
    const readyAt = async (step: StepHandle, signal: AbortSignal, offset: number) => {
      state.t = 1_000_000 + offset;
      await step.ready(signal);
      return calls.heartbeats;
    };
    return { state, worker, started, readyAt };
  }

  it("sends the call at once when renewed lately, after renewing the lease when not, and while the store cannot say before the lease lapses", async () => {
    const { state, worker, started, readyAt } = setup(true);
    const ctx = await started;
    const step = ctx.startStep({ kind: "tool_call", skillId: "skl_1", tool: "t", arguments: {} });
    state.down = true;
    expect(await readyAt(step, ctx.signal, 10_000)).toBe(0);
    expect(await readyAt(step, ctx.signal, 45_000)).toBe(1);
    state.down = false;
    expect(await readyAt(step, ctx.signal, 50_000)).toBe(2);
    // Renewed at +50 s: ten seconds later it is young again.
    expect(await readyAt(step, ctx.signal, 60_000)).toBe(2);
    // Unconfirmed for longer than the lease: another worker may hold the run.
    state.down = true;
    await expect(readyAt(step, ctx.signal, 111_000)).rejects.toThrow("run lease lapsed while the store was unreachable");
    expect(ctx.signal.aborted).toBe(true);
    await worker.stop(0);
  });

  it("does not send the call once the run is no longer held here", async () => {
    const { worker, started, readyAt } = setup(false);
    const ctx = await started;
    const step = ctx.startStep({ kind: "tool_call", skillId: "skl_1", tool: "t", arguments: {} });
    await expect(readyAt(step, ctx.signal, 45_000)).rejects.toThrow(/no longer held by this worker/);
    expect(ctx.signal.aborted).toBe(true);
    await worker.stop(0);
  });
});
