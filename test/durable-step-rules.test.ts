// What a run claimed again reuses of its record (durable steps, SPEC §6),
// step by step: outcomes that are what the run went on with, and nothing
// else. The real agent runtime on SQLite calls a real MCP SDK server and a
// scripted model; a run is made claimable again with its record as a worker
// that died before finishing it left it (test/durable-steps.test.ts kills
// real processes for the end-to-end case).
import type Database from "better-sqlite3";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { DEFAULT_RECORD_LIMITS } from "../src/runtime/recordable.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { startModelServer, type ScriptedReply } from "./support/model-server.js";
import { bearer, connectMust, startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;
const META = "agentplane/idempotency-key";

let issuer: DevIssuer;
let admin: string;
let server: TestServer;
let mcp: CustomerMcp;
let skillId: string;

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  mcp = await startOpenMcp();
  server = await startServer({
    authenticator: issuer.authenticator(60),
    outboundAllow: ["127.0.0.0/8"],
    // A run's record holds 5,000 bytes: a large step result is cut to fit.
    runtime: { executor: "agents", leaseMs: 30_000, recordLimits: { ...DEFAULT_RECORD_LIMITS, runRecordBytes: 5000 } },
  });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  skillId = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
});
afterAll(async () => {
  await server.close();
  await mcp.close();
});

const must = (method: string, body: unknown): Promise<Json> => connectMust(server, method, body, bearer(admin, "acme"));
const getRun = async (id: string) => (await must("GetRun", { id })).run as Json;
const stepsOf = (run: Json) => (run.steps ?? []) as Json[];

async function ended(id: string, attempt: number): Promise<Json> {
  return waitFor(`attempt ${attempt} of run ${id} to end`, 20_000, async () => {
    const run = await getRun(id);
    return run.attempt === attempt && !["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string) ? run : undefined;
  }, 25);
}

// Makes an ended run claimable again as its worker would have left it had it
// died before recording the outcome: `running`, lease expired, owned by a
// worker that is gone, every step as recorded.
function orphan(runId: string): void {
  const db = (server.store as unknown as { db: { $client: Database.Database } }).db.$client;
  db.prepare("update runs set status = 'running', output = null, error = '', lease_owner = 'worker-gone', lease_expire_time = ? where id = ?").run(Date.now() - 1000, runId);
  server.app.worker!.wake();
}

// The tools/calls the MCP server gets from here on: name and key.
function callsFrom() {
  const before = mcp.toolCallRequests().length;
  return () => mcp.toolCallRequests().slice(before).map((c) => ({ name: c.name, key: c.meta?.[META] as string }));
}

// Names are unique in a tenant: each agent gets its own.
let plans = 0;
async function planAgent(steps: { tool: string; arguments: string }[]): Promise<string> {
  const agent = (await must("CreateAgent", { agent: { name: `plan ${++plans}`, skillIds: [skillId], steps: steps.map((s) => ({ skillId, ...s })) } })).agent as Json;
  return agent.id as string;
}

const runAgent = async (agentId: string, input: Json = {}) => ((await must("RunAgent", { id: agentId, input })).run as Json).id as string;

// [attempt, tool, status, resumedFromAttempt] of each step.
const timeline = (run: Json) => stepsOf(run).map((s) => [s.attempt, s.tool, s.status, s.resumedFromAttempt ?? 0]);

describe("a plan agent claimed again", () => {
  it("whose steps all completed makes no call and ends with the same output", async () => {
    const agentId = await planAgent([
      { tool: "add", arguments: '{"a": input.n, "b": 1}' },
      { tool: "echo", arguments: '{"text": $string(steps[0].result.sum)}' },
    ]);
    const seen = callsFrom();
    const id = await runAgent(agentId, { n: 1 });
    expect(await ended(id, 1)).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "2" } });
    orphan(id);
    const run = await ended(id, 2);
    expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "2" } });
    expect(seen().map((c) => c.name)).toEqual(["add", "echo"]);
    expect(timeline(run)).toEqual([
      [1, "add", "STEP_STATUS_SUCCEEDED", 0],
      [1, "echo", "STEP_STATUS_SUCCEEDED", 0],
      [2, "add", "STEP_STATUS_SUCCEEDED", 1],
      [2, "echo", "STEP_STATUS_SUCCEEDED", 1],
    ]);
  });

  it("fails again, without calling, at a step its tool answered with an error", async () => {
    const agentId = await planAgent([{ tool: "fail", arguments: "{}" }]);
    const seen = callsFrom();
    const id = await runAgent(agentId);
    const first = await ended(id, 1);
    expect(first).toMatchObject({ status: "RUN_STATUS_FAILED", error: expect.stringMatching(/^steps\[0\] \(fail\): tool_error/) });
    orphan(id);
    const run = await ended(id, 2);
    expect(run).toMatchObject({ status: "RUN_STATUS_FAILED", error: first.error });
    expect(seen().map((c) => c.name)).toEqual(["fail"]);
    expect(timeline(run)).toEqual([
      [1, "fail", "STEP_STATUS_FAILED", 0],
      [2, "fail", "STEP_STATUS_FAILED", 1],
    ]);
  });

  it("calls again, with the same key, a step that failed without an answer from its tool", async () => {
    const agentId = await planAgent([{ tool: "echo", arguments: '{"text": "once more"}' }]);
    const seen = callsFrom();
    // Every try of attempt 1 is answered 503: the call gives up.
    mcp.failNext(4, "tools/call");
    const id = await runAgent(agentId);
    expect(await ended(id, 1)).toMatchObject({ status: "RUN_STATUS_FAILED", error: expect.stringContaining("skill_") });
    orphan(id);
    const run = await ended(id, 2);
    expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "once more" } });
    const calls = seen();
    expect(calls).toHaveLength(5);
    expect(new Set(calls.map((c) => c.key)).size).toBe(1);
    expect(timeline(run)).toEqual([
      [1, "echo", "STEP_STATUS_FAILED", 0],
      [2, "echo", "STEP_STATUS_SUCCEEDED", 0],
    ]);
  });

  it("calls again a step whose result the record holds only cut short, so that no step goes on with less than it had", async () => {
    const agentId = await planAgent([
      { tool: "echo", arguments: '{"text": $pad("", 3000, "x")}' },
      { tool: "add", arguments: '{"a": 1, "b": 2}' },
    ]);
    const seen = callsFrom();
    const id = await runAgent(agentId);
    const first = await ended(id, 1);
    expect(first.status).toBe("RUN_STATUS_SUCCEEDED");
    expect(stepsOf(first)[0]!.result).toMatchObject({ $truncated: { bytes: 3011 } });
    orphan(id);
    const run = await ended(id, 2);
    expect(run.status).toBe("RUN_STATUS_SUCCEEDED");
    const calls = seen();
    expect(calls.map((c) => c.name)).toEqual(["echo", "add", "echo"]);
    expect(calls[2]!.key).toBe(calls[0]!.key);
    expect(timeline(run)).toEqual([
      [1, "echo", "STEP_STATUS_SUCCEEDED", 0],
      [1, "add", "STEP_STATUS_SUCCEEDED", 0],
      [2, "echo", "STEP_STATUS_SUCCEEDED", 0],
      [2, "add", "STEP_STATUS_SUCCEEDED", 1],
    ]);
  });
});

describe("a model agent claimed again", () => {
  it("replays a tool's error answer into the conversation without calling the tool again", async () => {
    const script: ScriptedReply[] = [{ toolCalls: [{ name: "tools__fail", arguments: {} }] }, { content: "gave up" }];
    const model = await startModelServer((_r, i) => script[i] ?? { content: "asked again" });
    try {
      const agent = (await must("CreateAgent", { agent: { name: "m1", skillIds: [skillId], model: { baseUrl: model.baseUrl, model: "scripted" } } })).agent as Json;
      const seen = callsFrom();
      const id = await runAgent(agent.id as string);
      expect(await ended(id, 1)).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: "gave up" });
      // As if the worker died before it recorded the last turn's reply.
      const db = (server.store as unknown as { db: { $client: Database.Database } }).db.$client;
      const steps = JSON.parse(db.prepare<[string], { steps: string }>("select steps from runs where id = ?").get(id)!.steps) as Json[];
      db.prepare("update runs set steps = ? where id = ?").run(JSON.stringify(steps.slice(0, 2)), id);
      orphan(id);
      const run = await ended(id, 2);
      expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: "asked again" });
      expect(seen().map((c) => c.name)).toEqual(["fail"]);
      const requests = model.requests();
      expect(requests).toHaveLength(3);
      // The model is asked the same question again: the same conversation.
      expect(requests[2]!.messages.slice(1)).toEqual(requests[1]!.messages.slice(1).map((m) => (m.role === "assistant" ? { role: "assistant", content: null, tool_calls: m.tool_calls } : m)));
      expect(requests[2]!.messages.at(-1)).toMatchObject({ role: "tool", content: expect.stringMatching(/^error: tool_error/) });
      expect(stepsOf(run).filter((s) => s.attempt === 2).map((s) => [s.kind, s.status, s.resumedFromAttempt ?? 0])).toEqual([
        ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED", 1],
        ["STEP_KIND_TOOL_CALL", "STEP_STATUS_FAILED", 1],
        ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED", 0],
      ]);
    } finally {
      await model.close();
    }
  });

  it("asks the model again when the conversation is no longer the one a recorded reply answered (its instructions changed)", async () => {
    const model = await startModelServer((_r, i) => (i === 0 ? { toolCalls: [{ name: "tools__echo", arguments: { text: "a" } }] } : { content: `reply ${i}` }));
    try {
      const agent = (await must("CreateAgent", {
        agent: { name: "m2", instructions: "be brief", skillIds: [skillId], model: { baseUrl: model.baseUrl, model: "scripted" } },
      })).agent as Json;
      const id = await runAgent(agent.id as string);
      expect(await ended(id, 1)).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: "reply 1" });
      await must("UpdateAgent", { agent: { id: agent.id, instructions: "be thorough" }, updateMask: "instructions" });
      const seen = callsFrom();
      orphan(id);
      const run = await ended(id, 2);
      // A new first turn: asked again, and its answer ends the run.
      expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: "reply 2" });
      expect(model.requests()[2]!.messages[0]).toEqual({ role: "system", content: "be thorough" });
      expect(seen()).toEqual([]);
      expect(stepsOf(run).filter((s) => s.attempt === 2).map((s) => [s.kind, s.resumedFromAttempt ?? 0])).toEqual([["STEP_KIND_MODEL_CALL", 0]]);
    } finally {
      await model.close();
    }
  });
});
