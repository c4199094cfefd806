// Runs as a user sees them through the API, and as rows in the store:
// workers claiming with leases (at-least-once after a crash, bounded
// attempts), the concurrency limit, wake-up on new runs, cancellation,
// graceful shutdown, schedules that fire once per slot across restarts,
// event replay, and run listing filters.
import Database from "better-sqlite3";
import { Cron } from "croner";
import { hostname } from "node:os";
import { join } from "node:path";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { newId } from "../src/lib/ids.js";
import { createLogger } from "../src/log.js";
import type { ExecutionResult, Executor } from "../src/runtime/executor.js";
import { Scheduler } from "../src/runtime/scheduler.js";
import { DEFAULT_STOP_GRACE_MS, Worker } from "../src/runtime/worker.js";
import { SignalHub } from "../src/store/signal-hub.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, startServer, type TestServer, type TestServerOptions } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

type Json = Record<string, unknown>;

interface RunRowRaw {
  status: string;
  attempt: number;
  lease_owner: string | null;
  lease_expire_time: number | null;
  start_time: number | null;
  end_time: number | null;
  error: string;
}

const silent = createLogger("silent");

// Proto3 JSON leaves out zero values: a run never claimed has no `attempt`.
const attemptOf = (run: Json): number => (run.attempt as number | undefined) ?? 0;

// Polls `probe` every `intervalMs` until `ok` holds; fails after `timeoutMs`.
// No deadline here tells a fast path from a slow one: where that matters the
// slow path (the idle poll, the lease heartbeat) is set beyond any deadline.
async function until<T>(what: string, probe: () => Promise<T> | T, ok: (v: T) => boolean, timeoutMs = 30_000, intervalMs = 10): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// POST /webhooks/events as a sender would.
async function postEvent(server: TestServer, token: string, body: Json): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

// The ids ListRuns answers with (newest first), failing on an error.
async function runIds(t: Pick<Suite, "call">, filter: Json, tenant?: string): Promise<string[]> {
  const res = await t.call("ListRuns", filter, tenant);
  expect(res.status).toBe(200);
  return ((res.body.runs as Json[] | undefined) ?? []).map((r) => r.id as string);
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

interface Suite {
  server: TestServer;
  token: string;
  tenantId: string;
  call(method: string, body: unknown, tenant?: string): Promise<{ status: number; body: Json }>;
  createAgent(name: string): Promise<string>;
  runAgent(agentId: string, input?: unknown): Promise<string>;
  getRun(id: string, tenant?: string): Promise<Json>;
  waitForStatus(id: string, status: string, timeoutMs?: number): Promise<Json>;
  row(id: string): RunRowRaw;
}

// One server per suite, with the dev client admin of "acme" and "globex".
function suite(options: Omit<TestServerOptions, "authenticator"> = {}): Suite {
  const ctx = {} as Suite; // filled in by beforeAll and below
  let issuer: DevIssuer;
  beforeAll(async () => {
    issuer = await devIssuer();
    ctx.server = await startServer({ authenticator: issuer.authenticator(60), ...options });
    ctx.tenantId = await ctx.server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    await ctx.server.seedTenant("globex", [{ subject: issuer.clientId, role: "admin" }]);
    ctx.token = await devToken(issuer);
  });
  afterAll(() => ctx.server.close());

  ctx.call = (method, body, tenant = "acme") => connectCall(ctx.server, method, body, bearer(ctx.token, tenant));
  ctx.createAgent = async (name) => {
    const res = await ctx.call("CreateAgent", { agent: { name, model: PLACEHOLDER_MODEL } });
    expect(res.status).toBe(200);
    return (res.body.agent as Json).id as string;
  };
  ctx.runAgent = async (agentId, input) => {
    const res = await ctx.call("RunAgent", { id: agentId, ...(input === undefined ? {} : { input }) });
    expect(res.status).toBe(200);
    return (res.body.run as Json).id as string;
  };
  ctx.getRun = async (id, tenant) => {
    const res = await ctx.call("GetRun", { id }, tenant);
    expect(res.status).toBe(200);
    return res.body.run as Json;
  };
  ctx.waitForStatus = (id, status, timeoutMs) =>
    until(`run ${id} to be ${status}`, () => ctx.getRun(id), (r) => r.status === status, timeoutMs);
  ctx.row = (id) => {
    const db = new Database(join(ctx.server.dir, "agentplane.db"), { readonly: true });
    try {
      return db.prepare("select * from runs where id = ?").get(id) as RunRowRaw;
    } finally {
      db.close();
    }
  };
  return ctx;
}

describe("runs", () => {
  describe("with the no-op executor", () => {
    // No idle poll within the suite's time: every run here starts because
    // something woke the worker.
    const t = suite({ runtime: { idlePollMs: 600_000 } });
    let agentId: string;
    beforeAll(async () => {
      agentId = await t.createAgent("noop");
    });

    it("executes a manual run: one noop step, output, attempt 1, times set", async () => {
      const id = await t.runAgent(agentId, { ticket: 7 });
      const run = await t.waitForStatus(id, "RUN_STATUS_SUCCEEDED");
      expect(run).toMatchObject({ id, agentId, tenant: "acme", input: { ticket: 7 }, attempt: 1, output: { ok: true } });
      expect(run.error).toBeUndefined();
      const steps = run.steps as Json[];
      expect(steps).toHaveLength(1);
      expect(steps[0]).toMatchObject({ kind: "STEP_KIND_TOOL_CALL", tool: "noop", arguments: { run_id: id }, result: { ok: true } });
      // Which attempt, on which worker of which host and process.
      expect(steps[0]).toMatchObject({ attempt: 1, worker: t.server.app.worker!.owner });
      expect(t.server.app.worker!.owner).toMatch(new RegExp(`^worker-${hostname().replace(/[.]/g, "\\.")}-${process.pid}-[0-9a-f]{8}$`));
      const start = Date.parse(run.startTime as string);
      const end = Date.parse(run.endTime as string);
      expect(Number.isFinite(start) && Number.isFinite(end)).toBe(true);
      expect(end).toBeGreaterThanOrEqual(start);
      expect(t.row(id)).toMatchObject({ status: "succeeded", lease_owner: null, lease_expire_time: null });
    });

    it("wakes the worker on a new run instead of waiting for the idle poll", async () => {
      // Let the worker go idle first, so only a wake-up can start the run
      // (the suite's idle poll is 10 minutes away).
      await until("the worker to be idle", () => t.server.app.worker!.active, (n) => n === 0);
      const id = await t.runAgent(agentId);
      await t.waitForStatus(id, "RUN_STATUS_SUCCEEDED", 30_000);
    });

    it("refuses to cancel a run that already ended", async () => {
      const id = await t.runAgent(agentId);
      await t.waitForStatus(id, "RUN_STATUS_SUCCEEDED");
      const res = await t.call("CancelRun", { id });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: "failed_precondition", message: expect.stringContaining("already ended (succeeded)") });
      expect((await t.getRun(id)).status).toBe("RUN_STATUS_SUCCEEDED");
    });

    it("claims a crashed worker's run again once its lease expires (attempt 2)", async () => {
      const { queue } = t.server.store;
      const id = newId("run");
      const now = Date.now();
      const inserted = queue.insertMany([{ id, tenantId: t.tenantId, agentId, status: "queued", steps: [], createTime: now, updateTime: now }]);
      // A worker claims it, then dies: no heartbeat, no finish. It claims
      // before the insert is awaited, so before the store's signal of the
      // new run wakes the live worker.
      const claimed = await queue.claim("dead", 1, 50, 3, Date.now(), []);
      expect(await inserted).toBe(true);
      expect(claimed.map((r) => [r.id, r.attempt])).toEqual([[id, 1]]);
      expect((await t.getRun(id)).status).toBe("RUN_STATUS_RUNNING");
      // Any wake-up (here an explicit one) makes the live worker sleep until
      // that lease expires rather than for its idle poll.
      t.server.app.worker!.wake();
      const run = await t.waitForStatus(id, "RUN_STATUS_SUCCEEDED");
      expect(run).toMatchObject({ attempt: 2, output: { ok: true } });
      expect(run.steps as Json[]).toEqual([expect.objectContaining({ tool: "noop", attempt: 2, worker: t.server.app.worker!.owner })]);
      // The dead worker's lease is gone: it can neither extend nor finish.
      expect(await queue.heartbeat("dead", [id], 1000, Date.now())).toEqual(new Set());
      expect(await queue.finish("dead", id, { status: "failed", steps: [], error: "late" }, Date.now())).toBe(false);
      expect((await t.getRun(id)).status).toBe("RUN_STATUS_SUCCEEDED");
    });
  });

  describe("concurrency limit", () => {
    const running = new Map<string, () => void>();
    const started: string[] = [];
    let peak = 0;
    const executor: Executor = {
      async execute(run, ctx) {
        started.push(run.id);
        const gate = deferred();
        running.set(run.id, gate.resolve);
        peak = Math.max(peak, running.size);
        await gate.promise;
        running.delete(run.id);
        ctx.startStep({ kind: "tool_call", skillId: "", tool: "count", arguments: {} }).end({ result: {}, error: "" });
        return { status: "succeeded", output: { n: started.indexOf(run.id) } };
      },
    };
    // No idle poll within the suite's time: a freed slot is refilled by the wake-up.
    const t = suite({ runtime: { executor, concurrency: 2, idlePollMs: 600_000 } });

    it("never runs more than `concurrency` runs at once, and refills freed slots", async () => {
      const agentId = await t.createAgent("limited");
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push(await t.runAgent(agentId, { i }));

      const queued = async () =>
        ((await t.call("ListRuns", { agentId, status: "RUN_STATUS_QUEUED" })).body.runs as Json[] | undefined)?.length ?? 0;
      await until("two runs to start", () => running.size, (n) => n === 2);
      expect(await queued()).toBe(4);

      // Release the runs in flight one at a time; each freed slot is taken by
      // a queued run (there is no idle poll to do it), never a third at once.
      for (let released = 1; released <= 6; released++) {
        const [oldest] = running.keys();
        running.get(oldest!)!();
        const want = { started: Math.min(6, 2 + released), running: Math.min(2, 6 - released) };
        await until(
          `the state after ${released} released`,
          () => ({ started: started.length, running: running.size }),
          (s) => s.started === want.started && s.running === want.running,
        );
      }
      for (const id of ids) await t.waitForStatus(id, "RUN_STATUS_SUCCEEDED");
      expect(peak).toBe(2);
      expect(new Set(started)).toEqual(new Set(ids));
      expect(started).toHaveLength(6);
    });
  });

  describe("an agent's max_concurrent_runs", () => {
    const running = new Map<string, () => void>();
    let peak = 0;
    const executor: Executor = {
      async execute(run) {
        const gate = deferred();
        running.set(run.id, gate.resolve);
        peak = Math.max(peak, running.size);
        await gate.promise;
        running.delete(run.id);
        return { status: "succeeded", output: null };
      },
    };
    // No idle poll within the suite's time: the second run starts because the first ended.
    const t = suite({ runtime: { executor, concurrency: 4, idlePollMs: 600_000 } });

    it("runs one at a time with max_concurrent_runs 1 while workers have room; the others wait queued", async () => {
      const created = await t.call("CreateAgent", { agent: { name: "serial", maxConcurrentRuns: 1, model: PLACEHOLDER_MODEL } });
      expect(created.status).toBe(200);
      expect(created.body.agent).toMatchObject({ maxConcurrentRuns: 1 });
      const agentId = (created.body.agent as Json).id as string;
      const first = await t.runAgent(agentId, { n: 1 });
      const second = await t.runAgent(agentId, { n: 2 });
      await until("the first run to start", () => running.has(first), Boolean);
      // Well past a wake-up: the second stays queued, not failed.
      await new Promise((r) => setTimeout(r, 300));
      expect([...running.keys()]).toEqual([first]);
      expect(await t.getRun(second)).toMatchObject({ status: "RUN_STATUS_QUEUED" });
      expect(attemptOf(await t.getRun(second))).toBe(0);
      running.get(first)!();
      await until("the second run to start", () => running.has(second), Boolean);
      running.get(second)!();
      await t.waitForStatus(second, "RUN_STATUS_SUCCEEDED");
      expect(peak).toBe(1);
    });

    it("is changed and lifted through the update mask, and checked", async () => {
      const agentId = await t.createAgent("capped");
      expect((await t.call("GetAgent", { id: agentId })).body.agent).not.toHaveProperty("maxConcurrentRuns");
      const set = await t.call("UpdateAgent", { agent: { id: agentId, maxConcurrentRuns: 3 }, updateMask: "maxConcurrentRuns" });
      expect(set.status).toBe(200);
      expect(set.body.agent).toMatchObject({ maxConcurrentRuns: 3 });
      const lifted = await t.call("UpdateAgent", { agent: { id: agentId, maxConcurrentRuns: 0 }, updateMask: "maxConcurrentRuns" });
      expect(lifted.status).toBe(200);
      expect(lifted.body.agent).not.toHaveProperty("maxConcurrentRuns");
      for (const bad of [-1, 1001]) {
        const res = await t.call("CreateAgent", { agent: { name: "bad", maxConcurrentRuns: bad, model: PLACEHOLDER_MODEL } });
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({
          code: "invalid_argument",
          message: expect.stringContaining("agent.max_concurrent_runs: must be between 0 (no limit) and 1000"),
        });
      }
    });
  });

  describe("wake-ups through the store's signals", () => {
    const started = new Set<string>();
    const aborts = new Map<string, string>();
    const executor: Executor = {
      execute: (run, ctx) =>
        new Promise<ExecutionResult>((resolve) => {
          started.add(run.id);
          if ((run.input as Json | null)?.hold !== true) return resolve({ status: "succeeded", output: null });
          ctx.signal.addEventListener("abort", () => {
            aborts.set(run.id, (ctx.signal.reason as Error).message);
            resolve({ status: "failed", error: "aborted" });
          });
        }),
    };
    // No worker in the server: the one below hears only the signals.
    const t = suite();
    const signals = new SignalHub();
    let worker: Worker;
    let unsubscribe: (() => void)[] = [];
    beforeAll(() => {
      // Its idle poll and lease heartbeat (a third of the lease) are beyond the test: only the signals move it.
      worker = new Worker({ queue: t.server.store.queue, executor, log: silent, concurrency: 2, leaseMs: 1_800_000, maxAttempts: 3, idlePollMs: 600_000 });
      // As runtime/runtime.ts subscribes its worker.
      unsubscribe = [signals.onRunsQueued(() => worker.wake()), signals.onRunCancelled((id) => worker.cancel(id))];
      worker.start();
    });
    afterAll(async () => {
      for (const off of unsubscribe) off();
      await worker.stop(100);
    });

    it("claims runs another process queued when the store signals them, and aborts a run cancelled elsewhere", async () => {
      const agentId = await t.createAgent("elsewhere");
      await until("the worker to be idle", () => worker.active, (n) => n === 0);
      await new Promise((r) => setTimeout(r, 100));
      const id = await t.runAgent(agentId);
      await new Promise((r) => setTimeout(r, 200));
      expect(started.has(id)).toBe(false);
      signals.runsQueued();
      await t.waitForStatus(id, "RUN_STATUS_SUCCEEDED");

      const held = await t.runAgent(agentId, { hold: true });
      signals.runsQueued();
      await until("the held run to start", () => started.has(held), Boolean);
      signals.runCancelled(held);
      await until("the abort", () => aborts.get(held), Boolean);
      expect(aborts.get(held)).toBe("run cancelled");
    });
  });

  describe("cancellation of a queued run", () => {
    const t = suite();

    it("cancels it, and no worker runs it later", async () => {
      const agentId = await t.createAgent("idle");
      const id = await t.runAgent(agentId);
      expect((await t.getRun(id)).status).toBe("RUN_STATUS_QUEUED");
      const cancelled = await t.call("CancelRun", { id });
      expect(cancelled.status).toBe(200);
      expect(cancelled.body.run).toMatchObject({ id, status: "RUN_STATUS_CANCELLED" });
      expect(attemptOf(cancelled.body.run as Json)).toBe(0);
      expect((cancelled.body.run as Json).endTime).toEqual(expect.any(String));

      // A worker started afterwards runs the next queued run, not this one.
      const later = await t.runAgent(agentId);
      const executed: string[] = [];
      const worker = new Worker({
        queue: t.server.store.queue,
        executor: { execute: async (run): Promise<ExecutionResult> => (executed.push(run.id), { status: "succeeded", output: null }) },
        log: silent,
        concurrency: 4,
        leaseMs: 30_000,
        maxAttempts: 3,
      });
      worker.start();
      try {
        await t.waitForStatus(later, "RUN_STATUS_SUCCEEDED");
      } finally {
        await worker.stop(100);
      }
      expect(executed).toEqual([later]);
      const run = await t.getRun(id);
      expect(run.status).toBe("RUN_STATUS_CANCELLED");
      expect(attemptOf(run)).toBe(0);
    });
  });

  describe("cancellation of a running run", () => {
    const started = new Set<string>();
    const aborts = new Map<string, string>();
    // Runs until aborted, then claims success: the worker must not record it.
    const executor: Executor = {
      execute: (run, ctx) =>
        new Promise<ExecutionResult>((resolve) => {
          started.add(run.id);
          ctx.signal.addEventListener("abort", () => {
            aborts.set(run.id, (ctx.signal.reason as Error).message);
            resolve({ status: "succeeded", output: { late: true } });
          });
        }),
    };
    // The lease heartbeat (a third of the lease) and the idle poll are past
    // the test's time: the abort can only come from the cancel itself.
    const t = suite({ runtime: { executor, leaseMs: 600_000, idlePollMs: 600_000 } });

    it("aborts the execution at once and the run stays cancelled", async () => {
      const agentId = await t.createAgent("long");
      const id = await t.runAgent(agentId);
      await until("the run to start", () => started.has(id), Boolean);
      expect((await t.getRun(id)).status).toBe("RUN_STATUS_RUNNING");

      const res = await t.call("CancelRun", { id });
      expect(res.status).toBe(200);
      expect(res.body.run).toMatchObject({ status: "RUN_STATUS_CANCELLED" });
      await until("the executor to see the abort", () => aborts.has(id), Boolean, 30_000);
      expect(aborts.get(id)).toBe("run cancelled");

      await until("the worker to let go of the run", () => t.server.app.worker!.active, (n) => n === 0);
      const run = await t.getRun(id);
      expect(run).toMatchObject({ status: "RUN_STATUS_CANCELLED", attempt: 1 });
      expect(run.output).toBeUndefined();
      expect(t.row(id)).toMatchObject({ status: "cancelled", lease_owner: null, lease_expire_time: null });

      const again = await t.call("CancelRun", { id });
      expect(again.status).toBe(400);
      expect(again.body).toMatchObject({ code: "failed_precondition", message: expect.stringContaining("already ended (cancelled)") });
    });
  });

  describe("bounded attempts", () => {
    const t = suite();

    it("fails a run whose lease expired on its last attempt, and never hands it out again", async () => {
      const { queue } = t.server.store;
      const id = await t.runAgent(await t.createAgent("crashy"));
      const t0 = Date.now();
      const maxAttempts = 2;
      expect((await queue.claim("w1", 1, 10, maxAttempts, t0, [])).map((r) => [r.id, r.attempt])).toEqual([[id, 1]]);
      expect(await queue.claim("w2", 1, 10, maxAttempts, t0 + 5, [])).toEqual([]); // lease still held
      expect((await queue.claim("w2", 1, 10, maxAttempts, t0 + 20, [])).map((r) => [r.id, r.attempt, r.leaseOwner])).toEqual([[id, 2, "w2"]]);
      // w2 dies too: the next claim after its lease expires fails the run.
      expect(await queue.claim("w3", 1, 10, maxAttempts, t0 + 40, [])).toEqual([]);
      const run = await t.getRun(id);
      expect(run).toMatchObject({ status: "RUN_STATUS_FAILED", attempt: 2, error: expect.stringContaining("lease") });
      expect(t.row(id)).toMatchObject({ status: "failed", lease_owner: null, lease_expire_time: null, end_time: t0 + 40 });

      expect(await queue.claim("w4", 1, 10, maxAttempts, t0 + 1000, [])).toEqual([]);
      expect(await queue.finish("w2", id, { status: "succeeded", steps: [], output: 1, error: "" }, t0 + 1000)).toBe(false);
      expect((await t.getRun(id)).status).toBe("RUN_STATUS_FAILED");
    });
  });

  describe("graceful shutdown", () => {
    const aborts: string[] = [];
    const abortedAt: number[] = [];
    const started = new Set<string>();
    const executor: Executor = {
      execute: (run, ctx) =>
        new Promise<ExecutionResult>((resolve) => {
          started.add(run.id);
          ctx.signal.addEventListener("abort", () => {
            abortedAt.push(Date.now());
            aborts.push((ctx.signal.reason as Error).message);
            resolve({ status: "failed", error: "aborted" });
          });
        }),
    };
    const t = suite({ runtime: { executor } });

    it("aborts runs still going after the grace period and gives them back to the queue", async () => {
      const id = await t.runAgent(await t.createAgent("endless"));
      await until("the run to start", () => started.has(id), Boolean);
      expect(t.row(id)).toMatchObject({ status: "running", attempt: 1, lease_owner: t.server.app.worker!.owner });

      const asked = Date.now();
      await t.server.app.stop(100);
      expect(aborts).toEqual(["worker shutting down"]);
      // The run never ends by itself: aborted before the default grace, it
      // was the 100 ms grace that ran out, whatever the machine's load.
      expect(abortedAt[0]! - asked).toBeLessThan(DEFAULT_STOP_GRACE_MS);
      expect(t.row(id)).toMatchObject({ status: "queued", attempt: 0, lease_owner: null, lease_expire_time: null, end_time: null });
      // afterAll's close() stops the app a second time, which must be harmless.
    });
  });

  describe("schedules", () => {
    const t = suite();
    const expr = "*/5 * * * *";

    it("fires each slot once, across restarts, and only the latest missed slot", async () => {
      const agentId = await t.createAgent("cron");
      const created = await t.call("CreateTrigger", { trigger: { agentId, schedule: { cron: expr, timezone: "UTC" } } });
      expect(created.status).toBe(200);
      const triggerId = (created.body.trigger as Json).id as string;
      const db = () => new Database(join(t.server.dir, "agentplane.db"), { readonly: true });
      const conn = db();
      const { create_time: createTime } = conn.prepare("select create_time from triggers where id = ?").get(triggerId) as { create_time: number };
      conn.close();

      const cron = new Cron(expr, { paused: true, timezone: "UTC" });
      const slot = cron.nextRun(new Date(createTime))!.getTime();
      let fakeNow = createTime;
      const scheduler = new Scheduler({ store: t.server.store.schedules, log: silent, now: () => fakeNow });
      const runs = async () => ((await t.call("ListRuns", { triggerId })).body.runs as Json[] | undefined) ?? [];

      // Before the first slot after the trigger was created: nothing.
      expect((await scheduler.tick(Math.min(createTime + 1000, slot - 1))).fired).toBe(0);
      expect((await scheduler.tick(slot - 1)).fired).toBe(0);
      expect(await runs()).toEqual([]);

      // At the slot: one run, with the slot time as input.
      fakeNow = slot;
      expect(await scheduler.tick()).toMatchObject({ fired: 1, next: slot + 5 * 60_000 });
      let listed = await runs();
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({ agentId, triggerId, status: "RUN_STATUS_QUEUED", input: { scheduled_time: new Date(slot).toISOString() } });

      // The same slot again, and after a restart (a new scheduler): nothing.
      expect((await scheduler.tick(slot)).fired).toBe(0);
      expect((await scheduler.tick(slot + 60_000)).fired).toBe(0);
      const restarted = new Scheduler({ store: t.server.store.schedules, log: silent, now: () => fakeNow });
      expect((await restarted.tick(slot)).fired).toBe(0);

      // Down for 61.5 minutes (12 slots missed): only the latest fires, once,
      // whichever scheduler instance ticks.
      const late = slot + 3600_000 + 90_000;
      const latest = slot + 3600_000;
      expect((await restarted.tick(late)).fired).toBe(1);
      expect((await restarted.tick(late)).fired).toBe(0);
      expect((await scheduler.tick(late)).fired).toBe(0);
      listed = await runs();
      expect(listed.map((r) => (r.input as Json).scheduled_time)).toEqual([new Date(latest).toISOString(), new Date(slot).toISOString()]);

      const slotsDb = db();
      const slots = slotsDb.prepare("select slot_time, run_id from schedule_slots where trigger_id = ? order by slot_time").all(triggerId);
      slotsDb.close();
      expect(slots).toEqual([
        { slot_time: slot, run_id: listed[1]!.id },
        { slot_time: latest, run_id: listed[0]!.id },
      ]);
    });

    // A scheduler keeps each trigger's parsed cron and next slot between
    // ticks; a trigger changed meanwhile fires by its new schedule only.
    it("fires a schedule changed since the last tick by its new cron and timezone, not the one it had planned", async () => {
      const agentId = await t.createAgent("changing");
      const created = await t.call("CreateTrigger", { trigger: { agentId, schedule: { cron: "0 0 1 1 *", timezone: "UTC" } } });
      expect(created.status).toBe(200);
      const triggerId = (created.body.trigger as Json).id as string;
      const conn = new Database(join(t.server.dir, "agentplane.db"), { readonly: true });
      const { create_time: createTime } = conn.prepare("select create_time from triggers where id = ?").get(triggerId) as { create_time: number };
      conn.close();
      const scheduler = new Scheduler({ store: t.server.store.schedules, log: silent });
      const fired = async () => (((await t.call("ListRuns", { triggerId })).body.runs as Json[] | undefined) ?? []).map((r) => (r.input as Json).scheduled_time);
      const at = (ms: number) => new Date(ms).toISOString();

      // Planned yearly; then every five minutes, fired at its first slot.
      await scheduler.tick(createTime + 1);
      expect((await t.call("UpdateTrigger", { trigger: { id: triggerId, schedule: { cron: "*/5 * * * *", timezone: "UTC" } } })).status).toBe(200);
      const five = new Cron("*/5 * * * *", { paused: true, timezone: "UTC" }).nextRun(new Date(createTime))!.getTime();
      await scheduler.tick(five);
      expect(await fired()).toEqual([at(five)]);

      // Then hourly in India (UTC+5:30): a run at the hour there, and none
      // five minutes later, a slot of the schedule before.
      expect((await t.call("UpdateTrigger", { trigger: { id: triggerId, schedule: { cron: "0 * * * *", timezone: "Asia/Kolkata" } } })).status).toBe(200);
      const hour = new Cron("0 * * * *", { paused: true, timezone: "Asia/Kolkata" }).nextRun(new Date(five))!.getTime();
      await scheduler.tick(hour);
      expect(await fired()).toEqual([at(hour), at(five)]);
      await scheduler.tick(hour + 300_000);
      expect(await fired()).toEqual([at(hour), at(five)]);
    });
  });

  describe("event replay (no worker)", () => {
    const t = suite();

    it("ReplayEvent queues runs for the triggers that match the event now", async () => {
      const agentA = await t.createAgent("a");
      const agentB = await t.createAgent("b");
      const source = await t.call("CreateWebhookSource", { webhookSource: { name: "shop" } });
      expect(source.status).toBe(200);
      const accepted = await postEvent(t.server, source.body.token as string, { event_type: "order.created", payload: { total: 5 } });
      expect(accepted).toMatchObject({ status: 202, body: { event_id: expect.stringMatching(/^evt_/), matched_triggers: 0 } });
      const eventId = accepted.body.event_id as string;
      expect((await t.call("ListRuns", { eventId })).body.runs).toBeUndefined();

      // Added after the event: one whose filter matches its payload, one whose filter does not.
      const trigger = await t.call("CreateTrigger", {
        trigger: { agentId: agentB, webhook: { eventTypePattern: "order.*", filter: "payload.total < 10" } },
      });
      expect(trigger.status).toBe(200);
      const triggerId = (trigger.body.trigger as Json).id as string;
      const other = await t.call("CreateTrigger", {
        trigger: { agentId: agentA, webhook: { eventTypePattern: "order.*", filter: "payload.total > 100" } },
      });
      expect(other.status).toBe(200);

      const replayed = await t.call("ReplayEvent", { id: eventId });
      expect(replayed.status).toBe(200);
      const runs = replayed.body.runs as Json[];
      expect(runs).toHaveLength(1);
      expect(runs[0]).toMatchObject({ agentId: agentB, triggerId, eventId, status: "RUN_STATUS_QUEUED", tenant: "acme" });
      expect(attemptOf(runs[0]!)).toBe(0);
      const runId = runs[0]!.id as string;
      expect((replayed.body.event as Json).runIds).toEqual([runId]);

      const event = await t.call("GetEvent", { id: eventId });
      expect(event.status).toBe(200);
      expect(event.body.event).toMatchObject({ id: eventId, eventType: "order.created", payload: { total: 5 }, runIds: [runId] });
      expect(await runIds(t, { eventId })).toEqual([runId]);

      // Replaying again queues a new set of runs.
      const again = await t.call("ReplayEvent", { id: eventId });
      expect(again.status).toBe(200);
      const second = (again.body.runs as Json[]).map((r) => r.id as string);
      expect(second).toHaveLength(1);
      expect(second[0]).not.toBe(runId);
      expect(await runIds(t, { eventId })).toEqual([second[0], runId]);
    });
  });

  describe("listing (no worker)", () => {
    const t = suite();
    let agentA: string;
    let agentB: string;
    let triggerId: string;
    let eventId: string;
    let eventRun: string;

    // A run queued by an event (agent B, through a trigger), before the manual ones.
    beforeAll(async () => {
      agentA = await t.createAgent("a");
      agentB = await t.createAgent("b");
      const source = await t.call("CreateWebhookSource", { webhookSource: { name: "shop" } });
      const trigger = await t.call("CreateTrigger", { trigger: { agentId: agentB, webhook: { eventTypePattern: "order.*" } } });
      triggerId = (trigger.body.trigger as Json).id as string;
      const accepted = await postEvent(t.server, source.body.token as string, { event_type: "order.created", payload: { total: 5 } });
      expect(accepted).toMatchObject({ status: 202, body: { matched_triggers: 1 } });
      eventId = accepted.body.event_id as string;
      const db = new Database(join(t.server.dir, "agentplane.db"), { readonly: true });
      eventRun = (db.prepare("select id from runs where event_id = ?").get(eventId) as { id: string }).id;
      db.close();
    });

    it("ListRuns filters by agent, status, trigger and event", async () => {
      const a1 = await t.runAgent(agentA);
      const a2 = await t.runAgent(agentA);
      const b1 = await t.runAgent(agentB);
      expect((await t.call("CancelRun", { id: a2 })).status).toBe(200);

      expect(await runIds(t, {})).toEqual([b1, a2, a1, eventRun]);
      expect(await runIds(t, { agentId: agentA })).toEqual([a2, a1]);
      expect(await runIds(t, { agentId: agentB })).toEqual([b1, eventRun]);
      expect(await runIds(t, { status: "RUN_STATUS_CANCELLED" })).toEqual([a2]);
      expect(await runIds(t, { status: "RUN_STATUS_QUEUED" })).toEqual([b1, a1, eventRun]);
      expect(await runIds(t, { status: "RUN_STATUS_SUCCEEDED" })).toEqual([]);
      expect(await runIds(t, { agentId: agentA, status: "RUN_STATUS_QUEUED" })).toEqual([a1]);
      expect(await runIds(t, { triggerId })).toEqual([eventRun]);
      expect(await runIds(t, { eventId })).toEqual([eventRun]);
      expect(await runIds(t, { agentId: agentA, eventId })).toEqual([]);
    });

    it("keeps runs inside their tenant", async () => {
      const id = await t.runAgent(agentA);
      for (const method of ["GetRun", "CancelRun"]) {
        const res = await t.call(method, { id }, "globex");
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ code: "not_found", message: expect.stringContaining(id) });
      }
      expect(await runIds(t, {}, "globex")).toEqual([]);
      expect(await runIds(t, { agentId: agentA }, "globex")).toEqual([]);
      expect(await runIds(t, { eventId }, "globex")).toEqual([]);
      expect((await t.call("ReplayEvent", { id: eventId }, "globex")).status).toBe(404);
      expect((await t.getRun(id)).status).toBe("RUN_STATUS_QUEUED");
    });
  });
});
