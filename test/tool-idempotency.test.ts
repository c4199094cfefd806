// At-least-once made safe for tools (SPEC §5): every tools/call carries an
// idempotency key in `_meta["agentplane/idempotency-key"]`, one per step of
// a run, the same on every try of the call and on every attempt of the run,
// so that a customer's server can tell a repeat from a new call. A real MCP
// SDK server records the `_meta` of every tools/call it gets.
import type Database from "better-sqlite3";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { startOpenMcp, type CustomerMcp, type ToolCallRequest } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { startModelServer, type ScriptedReply } from "./support/model-server.js";
import { bearer, connectMust, startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;
const META = "agentplane/idempotency-key";
// 256 bits of SHA-256, base64url.
const KEY = /^[A-Za-z0-9_-]{43}$/;

let issuer: DevIssuer;
let admin: string;
let server: TestServer;
let open: CustomerMcp;
let skillId: string;
let tenantId: string;

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  open = await startOpenMcp();
  server = await startServer({ authenticator: issuer.authenticator(60), outboundAllow: ["127.0.0.0/8"], runtime: { executor: "agents", leaseMs: 600 } });
  tenantId = await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  skillId = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: open.url } }, server)).skill as Json).id as string;
});
afterAll(async () => {
  await server.close();
  await open.close();
});

async function must(method: string, body: unknown, on: TestServer = server): Promise<Json> {
  return connectMust(on, method, body, bearer(admin, "acme"));
}

async function waitForRun(id: string, on: TestServer = server): Promise<Json> {
  return waitFor(`run ${id} to end`, 20_000, async () => {
    const run = (await must("GetRun", { id }, on)).run as Json;
    return ["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string) ? undefined : run;
  }, 25);
}

// Names are unique in a tenant: each agent gets its own.
let plans = 0;
async function planAgent(steps: { tool: string; arguments: string }[]): Promise<string> {
  const agent = (await must("CreateAgent", { agent: { name: `plan ${++plans}`, skillIds: [skillId], steps: steps.map((s) => ({ skillId, ...s })) } })).agent as Json;
  return agent.id as string;
}

const startRun = async (agentId: string, input: Json = {}) => ((await must("RunAgent", { id: agentId, input })).run as Json).id as string;

// The tools/calls the server got from here on, with their keys.
function callsFrom(mcp: CustomerMcp) {
  const before = mcp.toolCallRequests().length;
  return () => mcp.toolCallRequests().slice(before).map((c: ToolCallRequest) => ({ name: c.name, key: c.meta?.[META] as string }));
}

// Makes the run claimable again as if its worker had died after its tool
// calls and before it recorded their outcomes: `running`, lease expired,
// owned by a worker that is gone, its steps recorded as started only, so
// that the next attempt executes them again (SQLite, as
// test/run-recovery.test.ts does); an outcome recorded would be reused
// (durable steps, test/durable-steps.test.ts).
function orphan(runId: string): void {
  const db = (server.store as unknown as { db: { $client: Database.Database } }).db.$client;
  const { steps } = db.prepare<[string], { steps: string }>("select steps from runs where id = ?").get(runId)!;
  const started = (JSON.parse(steps) as Json[]).map(({ result: _result, endTime: _endTime, ...step }) => ({ ...step, status: "running", error: "" }));
  db.prepare("update runs set status = 'running', lease_owner = 'worker-gone', lease_expire_time = ?, steps = ? where id = ?").run(
    Date.now() - 1000,
    JSON.stringify(started),
    runId,
  );
  server.app.worker!.wake();
}

describe("the key of a plan step", () => {
  it("differs between the steps of a run and between runs; it is opaque", async () => {
    const agentId = await planAgent([
      { tool: "add", arguments: '{"a": 1, "b": 2}' },
      { tool: "echo", arguments: '{"text": "done"}' },
    ]);
    const seen = callsFrom(open);
    const runIds: string[] = [];
    for (let i = 0; i < 2; i++) {
      runIds.push(await startRun(agentId));
      expect((await waitForRun(runIds[i]!)).status).toBe("RUN_STATUS_SUCCEEDED");
    }
    const calls = seen();
    expect(calls.map((c) => c.name)).toEqual(["add", "echo", "add", "echo"]);
    expect(new Set(calls.map((c) => c.key)).size).toBe(4);
    for (const { key } of calls) {
      expect(key).toMatch(KEY);
      for (const id of [...runIds, tenantId, skillId, "acme"]) expect(key).not.toContain(id);
    }
    // The tool's own arguments are left as they were: the key is not an argument.
    expect(open.toolCalls().slice(-2)).toEqual([
      { name: "add", arguments: { a: 1, b: 2 } },
      { name: "echo", arguments: { text: "done" } },
    ]);
  });

  it("is the same on every try of a call that failed transiently", async () => {
    const agentId = await planAgent([{ tool: "echo", arguments: '{"text": "retry me"}' }]);
    const seen = callsFrom(open);
    open.failNext(2, "tools/call");
    const run = await waitForRun(await startRun(agentId));
    expect(run.status).toBe("RUN_STATUS_SUCCEEDED");
    expect(((run.steps as Json[])[0]!.callAttempts as Json[]).length).toBe(3);
    const calls = seen();
    expect(calls).toHaveLength(3);
    expect(calls[0]!.key).toMatch(KEY);
    expect(new Set(calls.map((c) => c.key)).size).toBe(1);
  });

  it("is the same for the same step when the run is attempted again after its worker died", async () => {
    const agentId = await planAgent([
      { tool: "add", arguments: '{"a": input.n, "b": 1}' },
      { tool: "echo", arguments: '{"text": $string(steps[0].result.sum)}' },
    ]);
    const seen = callsFrom(open);
    const id = await startRun(agentId, { n: 41 });
    expect(await waitForRun(id)).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", attempt: 1 });
    orphan(id);
    const again = await waitFor("the second attempt to end", 60_000, async () => {
      const run = (await must("GetRun", { id })).run as Json;
      return run.attempt === 2 && run.status === "RUN_STATUS_SUCCEEDED" ? run : undefined;
    }, 25);
    expect((again.steps as Json[]).map((s) => [s.attempt, s.tool])).toEqual([[1, "add"], [1, "echo"], [2, "add"], [2, "echo"]]);
    const [add1, echo1, add2, echo2] = seen();
    expect([add1!.name, echo1!.name, add2!.name, echo2!.name]).toEqual(["add", "echo", "add", "echo"]);
    expect(add2!.key).toBe(add1!.key);
    expect(echo2!.key).toBe(echo1!.key);
    expect(add1!.key).not.toBe(echo1!.key);
  });

  it("is the same when another worker takes over a run whose lease expired mid-call", async () => {
    // This server's worker is cut off from the database once it has claimed
    // the run: its lease renewals, step records and outcome fail, so it can
    // neither keep nor finish the run. A replica on the same database takes
    // the run over once the lease expires.
    const queue = server.store.queue;
    const writes = { heartbeat: queue.heartbeat, recordSteps: queue.recordSteps, finish: queue.finish };
    const agentId = await planAgent([
      { tool: "echo", arguments: '{"text": "first"}' },
      { tool: "slow", arguments: '{"ms": 200}' },
    ]);
    const seen = callsFrom(open);
    for (const name of Object.keys(writes)) (queue as unknown as Record<string, unknown>)[name] = () => Promise.reject(new Error("database unreachable"));
    let replica: TestServer | undefined;
    try {
      const id = await startRun(agentId);
      await waitFor("the slow call to begin", 10_000, async () => (seen().some((c) => c.name === "slow") ? true : undefined), 10);
      replica = await startServer({ authenticator: issuer.authenticator(60), outboundAllow: ["127.0.0.0/8"], runtime: { executor: "agents", leaseMs: 600 }, dir: server.dir });
      // A bound with room, not a measure: at load 26 (two make tests side
      // by side) the replica's start, the lease's expiry and its two calls
      // once took longer than 20 s.
      const run = await waitFor("the replica's attempt to end", 60_000, async () => {
        const r = (await must("GetRun", { id }, replica)).run as Json;
        return r.attempt === 2 && r.status === "RUN_STATUS_SUCCEEDED" ? r : undefined;
      }, 25);
      expect((run.steps as Json[]).map((s) => s.worker)).toEqual([replica.app.worker!.owner, replica.app.worker!.owner]);
      const calls = seen();
      expect(calls.map((c) => c.name)).toEqual(["echo", "slow", "echo", "slow"]);
      for (const c of calls) expect(c.key).toMatch(KEY);
      expect(calls[2]!.key).toBe(calls[0]!.key);
      expect(calls[3]!.key).toBe(calls[1]!.key);
    } finally {
      Object.assign(queue, writes);
      await replica?.close();
    }
  });
});

describe("the key of a model agent's call", () => {
  it("follows the call (tool and arguments), not its place, across attempts; a repeat within one attempt is a call of its own", async () => {
    // Attempt 1: echo "a" and add, then echo "a" again. Attempt 2 (the model
    // asked again) calls add first, its arguments in another order, then
    // echo "a" twice in one turn.
    const attempts: ScriptedReply[][] = [
      [
        { toolCalls: [{ name: "tools__echo", arguments: { text: "a" } }, { name: "tools__add", arguments: { a: 1, b: 2 } }] },
        { toolCalls: [{ name: "tools__echo", arguments: { text: "a" } }] },
        { content: "done" },
      ],
      [
        { toolCalls: [{ name: "tools__add", arguments: { b: 2, a: 1 } }] },
        { toolCalls: [{ name: "tools__echo", arguments: { text: "a" } }, { name: "tools__echo", arguments: { text: "a" } }] },
        { content: "done" },
      ],
    ];
    // Three model requests per attempt.
    const model = await startModelServer((_request, index) => attempts[Math.floor(index / 3)]![index % 3]!);
    try {
      const agent = (await must("CreateAgent", { agent: { name: "assistant", skillIds: [skillId], model: { baseUrl: model.baseUrl, model: "scripted" } } })).agent as Json;
      const seen = callsFrom(open);
      const id = await startRun(agent.id as string);
      expect(await waitForRun(id)).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", attempt: 1 });
      orphan(id);
      await waitFor("the second attempt to end", 20_000, async () => {
        const run = (await must("GetRun", { id })).run as Json;
        return run.attempt === 2 && run.status === "RUN_STATUS_SUCCEEDED" ? run : undefined;
      }, 25);
      const calls = seen();
      expect(calls.map((c) => c.name)).toEqual(["echo", "add", "echo", "add", "echo", "echo"]);
      const [echoA, add, echoAgain, add2, echo2a, echo2b] = calls.map((c) => c.key);
      expect(new Set([echoA, add, echoAgain]).size).toBe(3);
      expect([add2, echo2a, echo2b]).toEqual([add, echoA, echoAgain]);
    } finally {
      await model.close();
    }
  });
});
