// Live steps (issue 11): a step is recorded `running` when it starts and
// completed in place; each try of its call is kept as a call attempt, a
// retry visible while it happens. Real server, real agent runtime, real MCP
// SDK server and a scripted model endpoint.
import { DEFAULT_RECORD_LIMITS } from "../src/runtime/recordable.js";
import type Database from "better-sqlite3";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { createLogger } from "../src/log.js";
import { StepRecorder } from "../src/runtime/step-recorder.js";
import type { RunQueue } from "../src/store/store.js";
import type { RunRow, RunStepRecord } from "../src/store/rows.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { startModelServer } from "./support/model-server.js";
import { bearer, connectMust, startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let admin: string;
let server: TestServer;
let mcp: CustomerMcp;
let skillId: string;
// Step writes to the store, by run: the worker's own calls to the real queue, counted.
const stepWrites = new Map<string, number>();

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  server = await startServer({ authenticator: issuer.authenticator(60), outboundAllow: ["127.0.0.0/8"], runtime: { executor: "agents", concurrency: 4 } });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  const queue = server.store.queue as { -readonly [K in keyof RunQueue]: RunQueue[K] };
  const record = queue.recordSteps.bind(queue);
  queue.recordSteps = (owner, id, steps, now) => {
    stepWrites.set(id, (stepWrites.get(id) ?? 0) + 1);
    return record(owner, id, steps, now);
  };
  mcp = await startOpenMcp();
  skillId = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
});
afterAll(async () => {
  await server.close();
  await mcp.close();
});

async function must(method: string, body: unknown): Promise<Json> {
  return connectMust(server, method, body, bearer(admin, "acme"));
}

const getRun = async (id: string) => (await must("GetRun", { id })).run as Json;
const stepsOf = (run: Json) => (run.steps ?? []) as Json[];
const attemptsOf = (step: Json) => (step.callAttempts ?? []) as Json[];
const ms = (t: unknown) => Date.parse(t as string);
// Proto JSON durations are seconds with a fraction: "1.503s".
const durationMs = (d: unknown) => Math.round(parseFloat(d as string) * 1000);

// Names are unique in a tenant: each agent gets its own.
let agents = 0;
async function startRun(tool: string, args: string, agent: Json = {}): Promise<string> {
  const created = (await must("CreateAgent", { agent: { name: `call ${tool} ${++agents}`, skillIds: [skillId], steps: [{ skillId, tool, arguments: args }], ...agent } })).agent as Json;
  return ((await must("RunAgent", { id: created.id, input: {} })).run as Json).id as string;
}

const ended = (id: string) =>
  waitFor(`run ${id} to end`, 15_000, async () => {
    const run = await getRun(id);
    return ["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string) ? undefined : run;
  }, 20);

describe("a tool step", () => {
  it("is running with no end while its call is in flight, then succeeded with its duration; the same over REST", async () => {
    const id = await startRun("slow", '{"ms": 1500}');
    const live = await waitFor("the step to be recorded", 5_000, async () => {
      const run = await getRun(id);
      return stepsOf(run).length ? run : undefined;
    }, 20);
    expect(live.status).toBe("RUN_STATUS_RUNNING");
    const [step] = stepsOf(live);
    expect(step).toMatchObject({ kind: "STEP_KIND_TOOL_CALL", tool: "slow", arguments: { ms: 1500 }, status: "STEP_STATUS_RUNNING", attempt: 1, worker: expect.stringMatching(/^worker-/) });
    expect(step).not.toHaveProperty("endTime");
    expect(step).not.toHaveProperty("duration");
    expect(step).not.toHaveProperty("result");
    expect(attemptsOf(step!)).toEqual([{ startTime: step!.startTime }]);

    const rest = await fetch(`${server.url}/api/v1/runs/${id}`, { headers: bearer(admin, "acme") });
    expect(rest.status).toBe(200);
    const restStep = stepsOf(((await rest.json()) as Json).run as Json)[0]!;
    expect(restStep).toMatchObject({ status: "STEP_STATUS_RUNNING", startTime: step!.startTime, callAttempts: [{ startTime: step!.startTime }] });
    expect(restStep).not.toHaveProperty("endTime");

    const run = await ended(id);
    expect(run.status).toBe("RUN_STATUS_SUCCEEDED");
    const [done] = stepsOf(run);
    expect(done).toMatchObject({ status: "STEP_STATUS_SUCCEEDED", startTime: step!.startTime, result: { waited: 1500 }, attempt: 1 });
    expect(done).not.toHaveProperty("error");
    const took = ms(done!.endTime) - ms(done!.startTime);
    expect(took).toBeGreaterThanOrEqual(1500);
    expect(durationMs(done!.duration)).toBe(took);
    expect(attemptsOf(done!)).toEqual([{ startTime: done!.startTime, endTime: done!.endTime }]);

    const after = (await (await fetch(`${server.url}/api/v1/runs/${id}`, { headers: bearer(admin, "acme") })).json()) as Json;
    expect(stepsOf(after.run as Json)[0]).toEqual(done);
    // One write when the step started, one when it ended.
    expect(stepWrites.get(id)).toBe(2);
  });

  it("keeps each try of a transient failure as a call attempt, the retry visible while it runs", async () => {
    mcp.failNext(1);
    const id = await startRun("slow", '{"ms": 1000}');
    const live = await waitFor("the retry to be recorded", 5_000, async () => {
      const step = stepsOf(await getRun(id))[0];
      return step && attemptsOf(step).length === 2 ? step : undefined;
    }, 20);
    // "try 1 failed: 503, try 2 running"
    expect(live.status).toBe("STEP_STATUS_RUNNING");
    const [first, second] = attemptsOf(live);
    expect(first).toMatchObject({ startTime: live.startTime, endTime: expect.any(String), error: expect.stringContaining("skill_error") });
    expect(first!.error).toContain("503");
    expect(second).not.toHaveProperty("endTime");
    // Due after the backoff (200 ms).
    expect(ms(second!.startTime) - ms(first!.endTime)).toBeGreaterThanOrEqual(200);

    const run = await ended(id);
    expect(run.status).toBe("RUN_STATUS_SUCCEEDED");
    const [step] = stepsOf(run);
    expect(step).toMatchObject({ status: "STEP_STATUS_SUCCEEDED", result: { waited: 1000 } });
    expect(step).not.toHaveProperty("error");
    const attempts = attemptsOf(step!);
    expect(attempts).toHaveLength(2);
    expect(attempts[0]).toEqual(first);
    expect(attempts[1]).not.toHaveProperty("error");
    expect(ms(attempts[1]!.startTime)).toBeGreaterThanOrEqual(ms(first!.endTime) + 200);
    expect(attempts[1]!.endTime).toBe(step!.endTime);
    // Start, the failed try, the end: at most one write each.
    expect(stepWrites.get(id)).toBeLessThanOrEqual(3);
  });

  it("is failed with the tool's error when the tool reports one, its one try too", async () => {
    const run = await ended(await startRun("fail", "{}"));
    expect(run.status).toBe("RUN_STATUS_FAILED");
    const [step] = stepsOf(run);
    expect(step).toMatchObject({ status: "STEP_STATUS_FAILED", error: expect.stringContaining("tool_error"), duration: expect.stringMatching(/s$/) });
    expect(attemptsOf(step!)).toEqual([{ startTime: step!.startTime, endTime: step!.endTime, error: step!.error }]);
  });

  it("is failed with the run's timeout when the agent times out around it", async () => {
    // Long enough for the step to start on a machine loaded past its cores
    // (at 0.3 s the run once timed out before it), far shorter than the call.
    const run = await ended(await startRun("slow", '{"ms": 60000}', { timeout: "5s" }));
    expect(run.status).toBe("RUN_STATUS_TIMED_OUT");
    const [step] = stepsOf(run);
    expect(step).toMatchObject({ status: "STEP_STATUS_FAILED", error: "agent timeout (5000 ms) reached", endTime: expect.any(String) });
    expect(attemptsOf(step!)).toEqual([{ startTime: step!.startTime, endTime: step!.endTime, error: "agent timeout (5000 ms) reached" }]);
  });

  it("is cancelled, neither running nor failed, once the run is cancelled around it", async () => {
    const id = await startRun("slow", '{"ms": 5000}');
    await waitFor("the step to start", 5_000, async () => (stepsOf(await getRun(id)).length ? true : undefined), 20);
    await must("CancelRun", { id });
    const run = await getRun(id);
    expect(run.status).toBe("RUN_STATUS_CANCELLED");
    expect(stepsOf(run)[0]).toMatchObject({ status: "STEP_STATUS_CANCELLED", error: "cancelled: the run was cancelled while the step ran" });
  });
});

describe("a model step", () => {
  it("keeps the model endpoint's transient failure and the retry as call attempts", async () => {
    const model = await startModelServer([{ status: 503, headers: { "retry-after-ms": "50" } }, { content: "done" }]);
    try {
      const agent = (await must("CreateAgent", { agent: { name: "assistant", model: { baseUrl: model.baseUrl, model: "scripted-1", apiKey: "k" } } })).agent as Json;
      const run = await ended(((await must("RunAgent", { id: agent.id, input: {} })).run as Json).id as string);
      expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: "done" });
      const [step] = stepsOf(run);
      expect(step).toMatchObject({ kind: "STEP_KIND_MODEL_CALL", status: "STEP_STATUS_SUCCEEDED", result: { content: "done" } });
      const attempts = attemptsOf(step!);
      expect(attempts).toHaveLength(2);
      expect(attempts[0]!.error).toContain("503");
      expect(ms(attempts[1]!.startTime)).toBeGreaterThanOrEqual(ms(attempts[0]!.endTime) + 50);
      expect(attempts[1]).toEqual({ startTime: attempts[1]!.startTime, endTime: step!.endTime });
    } finally {
      await model.close();
    }
  });
});

describe("steps recorded before steps had a status", () => {
  it("derive it: ended ones by their error, an unended one running only while the run runs", async () => {
    const agent = (await must("CreateAgent", { agent: { name: "legacy", skillIds: [skillId], steps: [{ skillId, tool: "echo", arguments: '{"text": "then"}' }] } })).agent as Json;
    const db = (server.store as unknown as { db: { $client: Database.Database } }).db.$client;
    const t = Date.now();
    const old = (error: string, endTime?: number) => ({ kind: "tool_call", skillId: "", tool: "noop", arguments: {}, error, startTime: t, ...(endTime ? { endTime } : {}) });
    const stage = async (status: string, steps: unknown[]) => {
      const id = ((await must("RunAgent", { id: agent.id, input: {} })).run as Json).id as string;
      await ended(id);
      db.prepare("update runs set status = ?, steps = ? where id = ?").run(status, JSON.stringify(steps), id);
      return id;
    };
    const finished = await getRun(await stage("failed", [old("", t + 5), old("skill_error: boom", t + 9), old("")]));
    expect(stepsOf(finished).map((s) => [s.status, s.duration, s.callAttempts])).toEqual([
      ["STEP_STATUS_SUCCEEDED", "0.005s", undefined],
      ["STEP_STATUS_FAILED", "0.009s", undefined],
      ["STEP_STATUS_FAILED", undefined, undefined],
    ]);
    expect(stepsOf(finished)[2]!.error).toContain("interrupted");
    const running = await getRun(await stage("running", [old("")]));
    expect(stepsOf(running)[0]).toMatchObject({ status: "STEP_STATUS_RUNNING" });
  });
});

describe("the step recorder's retry times", () => {
  it("records a retry's start no earlier than its due time by the recorder's own clock, whatever the timers' clock says", async () => {
    const written: RunStepRecord[][] = [];
    const queue = { recordSteps: async (_o: string, _id: string, steps: RunStepRecord[]) => void written.push(structuredClone(steps)) } as unknown as RunQueue;
    // A clock running at 90% of the timers' pace (another clock than the
    // event loop's, as Date.now is): a timer set for 200 ms fires when it
    // has moved 180 ms.
    const origin = Date.now();
    const now = () => origin + Math.floor((Date.now() - origin) * 0.9);
    const recorder = new StepRecorder({ queue, owner: "w", run: { id: "run_1", steps: [], attempt: 1 } as unknown as RunRow, log: createLogger("silent"), now, limits: DEFAULT_RECORD_LIMITS, ready: async () => {} });
    const step = recorder.start({ kind: "tool_call", skillId: "", tool: "t", arguments: {} });
    await step.backoff("skill_error: 503", 200, new AbortController().signal);
    step.end({ result: {}, error: "" });
    await recorder.close("");
    const [first, second] = recorder.steps[0]!.callAttempts!;
    expect(second!.startTime).toBeGreaterThanOrEqual(first!.endTime! + 200);
    expect(second!.endTime).toBeGreaterThanOrEqual(second!.startTime);
  });
});
