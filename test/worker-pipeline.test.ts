// The worker's claim pipeline (issue 20): a claim starts as soon as a slot
// frees, not when the batch ends; it asks for the free slots plus a prefetch
// of the runs that ended while the previous claim was in flight; prefetched
// runs start on the next free slot without a claim; runs that outlive a claim
// prefetch nothing; a run whose outcome is being recorded takes no slot, up
// to `concurrency` of them. Driven by a queue whose claims answer when the test says,
// and an executor whose runs end when the test says: no timing.
import pino from "pino";
import type { Executor, ExecutionResult } from "../src/runtime/executor.js";
import { Worker } from "../src/runtime/worker.js";
import type { RunRow } from "../src/store/rows.js";
import type { RunQueue } from "../src/store/store.js";

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
}
const deferred = <T>(): Deferred<T> => {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
};

let next = 0;
const run = (): RunRow => ({
  id: `run-${String(++next).padStart(4, "0")}`,
  tenantId: "ten",
  agentId: "agt",
  triggerId: null,
  eventId: null,
  input: null,
  status: "running",
  attempt: 1,
  steps: [],
  output: null,
  error: "",
  startTime: 0,
  endTime: null,
  leaseOwner: "w",
  leaseExpireTime: 60_000,
  traceParent: null,
  createTime: 0,
  updateTime: 0,
});

// Lets pending promise callbacks and setImmediate turns run.
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

// `holdFinishes`: each finish waits until the test commits it (`finishes`).
// `clock`: the worker's time, and the next lease expiry the queue answers.
function harness(concurrency: number, holdFinishes = false, clock = { now: 0, expiry: undefined as number | undefined, asked: 0 }) {
  const claims: { want: number; answer: Deferred<RunRow[]> }[] = [];
  const finishes = new Map<string, Deferred<boolean>>();
  const running = new Map<string, Deferred<ExecutionResult>>();
  const queue: RunQueue = {
    claim: (_owner, limit) => {
      const answer = deferred<RunRow[]>();
      claims.push({ want: limit, answer });
      return answer.promise;
    },
    heartbeat: async (_owner, ids) => new Set(ids),
    recordSteps: async () => true,
    finish: (_owner, id) => {
      if (!holdFinishes) return Promise.resolve(true);
      const committed = deferred<boolean>();
      finishes.set(id, committed);
      return committed.promise;
    },
    release: async () => {},
    cancel: async () => undefined,
    nextLeaseExpiry: async () => {
      clock.asked++;
      return clock.expiry;
    },
    insertMany: async () => true,
  };
  const executor: Executor = {
    execute: (r, ctx) => {
      const end = deferred<ExecutionResult>();
      running.set(r.id, end);
      ctx.signal.addEventListener("abort", () => end.resolve({ status: "failed", error: "aborted" }));
      return end.promise;
    },
  };
  const worker = new Worker({
    queue,
    executor,
    log: pino({ level: "silent" }),
    concurrency,
    leaseMs: 60_000,
    maxAttempts: 3,
    idlePollMs: 3_600_000,
    now: () => clock.now,
  });
  const end = async (id: string) => {
    running.get(id)!.resolve({ status: "succeeded", output: null });
    running.delete(id);
    await settle();
  };
  const commit = async (id: string) => {
    finishes.get(id)!.resolve(true);
    finishes.delete(id);
    await settle();
  };
  return { worker, claims, running, end, finishes, commit };
}

describe("worker claim pipeline", () => {
  it("claims when a slot frees, adds what ended during the last claim, and starts prefetched runs without a claim", async () => {
    const { worker, claims, running, end } = harness(4);
    worker.start();
    await settle();
    expect(claims.map((c) => c.want)).toEqual([4]);
    const first = [run(), run(), run(), run()];
    claims[0]!.answer.resolve(first);
    await settle();
    expect(running.size).toBe(4);

    // One run ends: a claim for its slot starts while the other three run.
    await end(first[0]!.id);
    expect(claims.map((c) => c.want)).toEqual([4, 1]);
    // Two more end while that claim is in flight: they are its prefetch.
    await end(first[1]!.id);
    await end(first[2]!.id);
    expect(claims).toHaveLength(2);
    claims[1]!.answer.resolve([run()]);
    await settle();
    // 3 slots free + 2 prefetched, less the one just taken.
    expect(claims.map((c) => c.want)).toEqual([4, 1, 4]);
    const batch = [run(), run(), run(), run()];
    claims[2]!.answer.resolve(batch);
    await settle();
    expect(running.size).toBe(4);
    expect(worker.active).toBe(4);

    // Two wait, leased, for a slot; when one frees, the first starts at
    // once, before any claim answers.
    expect(claims).toHaveLength(3);
    expect(running.has(batch[2]!.id)).toBe(false);
    await end(first[3]!.id);
    expect(running.has(batch[2]!.id)).toBe(true);
    expect(running.has(batch[3]!.id)).toBe(false);
    await worker.stop(0);
  });

  it("prefetches nothing for runs that outlive a claim", async () => {
    const { worker, claims, end } = harness(2);
    worker.start();
    await settle();
    const first = [run(), run()];
    claims[0]!.answer.resolve(first);
    await settle();
    await end(first[0]!.id);
    // Nothing else ended while this claim was in flight.
    claims[1]!.answer.resolve([run()]);
    await settle();
    await end(first[1]!.id);
    expect(claims.map((c) => c.want)).toEqual([2, 1, 1]);
    await worker.stop(0);
  });

  it("frees a run's slot once its outcome is being recorded, for up to `concurrency` outcomes at once", async () => {
    const { worker, claims, running, end, finishes, commit } = harness(2, true);
    worker.start();
    await settle();
    const [a, b] = [run(), run()];
    claims[0]!.answer.resolve([a, b]);
    await settle();

    // a ended; its finish has not committed, yet its slot is claimed for...
    await end(a.id);
    expect([...finishes.keys()]).toEqual([a.id]);
    expect(claims.map((c) => c.want)).toEqual([2, 1]);
    // ...and the next run executes meanwhile.
    const c = run();
    claims[1]!.answer.resolve([c]);
    await settle();
    expect(running.has(c.id)).toBe(true);
    expect(finishes.has(a.id)).toBe(true);

    // Three outcomes waiting, past the two allowed: no slot, no claim.
    await end(b.id);
    await end(c.id);
    expect([...finishes.keys()]).toEqual([a.id, b.id, c.id]);
    expect(claims).toHaveLength(2);
    await commit(a.id);
    expect(claims).toHaveLength(2);
    // One left below the limit: both slots are claimed for.
    await commit(b.id);
    expect(claims.map((c) => c.want)).toEqual([2, 1, 2]);
    claims[2]!.answer.resolve([]);
    await commit(c.id);
    await worker.stop(0);
  });

  // A claim that comes back short (the queue is drained) sleeps until a
  // wake, or until the next lease expiry (a dead worker's runs). That expiry
  // can only come later while no lease ends sooner than what was asked, and
  // a lease taken since ends a whole lease after it: asked once per lease
  // at most, not once per short claim (on PostgreSQL a round trip each, a
  // third of the runtime thread's statements at 2,500 runs/s).
  it("asks for the next lease expiry once, not after every claim that comes back short", async () => {
    const clock = { now: 1_000, expiry: 5_000 as number | undefined, asked: 0 };
    const { worker, claims } = harness(2, false, clock);
    try {
      worker.start();
      await settle();
      for (let i = 0; i < 10; i++) {
        claims.at(-1)!.answer.resolve([]);
        await settle();
        worker.wake();
        await settle();
      }
      expect(claims).toHaveLength(11);
      expect(clock.asked).toBe(1);
      // Past the expiry it was told of, it asks again (that run may be taken
      // now); this time no lease is held anywhere.
      clock.now = 5_006;
      clock.expiry = undefined;
      claims.at(-1)!.answer.resolve([]);
      await settle();
      expect(clock.asked).toBe(2);
      // With no lease at all, it asks again a lease later at the latest: a
      // lease taken meanwhile may end then.
      clock.now = 6_000;
      worker.wake();
      await settle();
      claims.at(-1)!.answer.resolve([]);
      await settle();
      expect(clock.asked).toBe(2);
      clock.now = 5_006 + 60_000;
      worker.wake();
      await settle();
      claims.at(-1)!.answer.resolve([]);
      await settle();
      expect(clock.asked).toBe(3);
    } finally {
      await worker.stop(0);
    }
  });
});
