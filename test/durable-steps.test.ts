// Durable steps (issue 20, SPEC §6): a run claimed again after its worker's
// process was killed resumes after its last completed step. The built
// `agentplane serve` executes a plan agent and a model agent against a real
// MCP SDK server and a scripted model; step 2's tool call is held in the MCP
// server, the process is killed (SIGKILL) once step 1's outcome is recorded,
// and a second process on the same database claims the run when its lease
// (1 s) expires. The completed step's tool call reaches the MCP server once,
// the interrupted one is sent again with its idempotency key, a model turn's
// recorded reply and tool results are replayed into the conversation, and
// the run's record (GetRun, WatchRun) and /metrics show what was resumed.
// On SQLite and on PostgreSQL.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { PlatformService } from "../gen/platform/v1/platform_service_pb.js";
import type { Run } from "../gen/platform/v1/run_pb.js";
import { CliProcess, DataDirs, ServeProcess, jwtEnv, runCli, serveEnv } from "./support/cli-process.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { startSigningIdp, type SigningIdp } from "./support/jwks-server.js";
import { freeLoopbackPort } from "./support/listen.js";
import { startModelServer, type ModelServer, type ScriptedReply } from "./support/model-server.js";
import { createTestDatabase, type TestDatabase } from "./support/postgres.js";
import { sampleValue } from "./support/prometheus.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;
const OPERATOR = "ops";
const META = "agentplane/idempotency-key";
const SECRET_KEY = Buffer.alloc(32, 7).toString("base64");

let idp: SigningIdp;
let token: string;
const dirs = new DataDirs("agentplane-durable-");
const databases: TestDatabase[] = [];

beforeAll(async () => {
  idp = await startSigningIdp("https://idp.durable.test", "https://api.durable.test");
  token = await idp.sign(OPERATOR);
});

afterAll(async () => {
  await CliProcess.killAll();
  await idp?.close();
  for (const db of databases) await db.drop();
  dirs.removeAll();
});

// Where the processes keep their runs: each test gets a fresh one, with
// tenant `acme` (OPERATOR its admin) created by the CLI.
interface Engine {
  name: string;
  env(): Promise<Record<string, string>>;
}

const ENGINES: Engine[] = [
  {
    name: "SQLite",
    env: async () => serveEnv(await dirs.withTenant("acme", OPERATOR), idp),
  },
  {
    name: "PostgreSQL",
    async env() {
      const db = await createTestDatabase();
      databases.push(db);
      await runCli(["tenant", "create", "acme", "--admin", OPERATOR], { AGENTPLANE_DATABASE_URL: db.url });
      return { AGENTPLANE_DATABASE_URL: db.url, ...jwtEnv(idp), AGENTPLANE_SECRET_KEY: SECRET_KEY, AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8" };
    },
  },
];

class Serve extends ServeProcess {
  constructor(env: Record<string, string>, port: number) {
    super(
      [],
      {
        ...env,
        AGENTPLANE_RUN_LEASE_SECONDS: "1",
        AGENTPLANE_WORKER_THREADS: "1",
        AGENTPLANE_LOG_LEVEL: "warn",
      },
      port,
      { token, tenant: "acme" },
    );
  }
}

async function serve(env: Record<string, string>): Promise<Serve> {
  const s = new Serve(env, await freeLoopbackPort());
  await s.ready("agentplane serve to be ready", 30_000);
  return s;
}

const getRun = async (on: Serve, id: string) => (await on.call<{ run: Json }>("GetRun", { id })).run;
const stepsOf = (run: Json) => (run.steps ?? []) as Json[];

// The tools/calls the MCP server received: name and idempotency key.
const received = (mcp: CustomerMcp) => mcp.toolCallRequests().map((c) => ({ name: c.name, key: c.meta?.[META] as string }));

// Waits until the record of the first process shows `ready` and the MCP
// server holds the call of `held`, then kills the process (SIGKILL). The
// held call keeps the run mid-step however slow the machine: nothing can
// end it between the look and the kill.
async function killMidStep(first: Serve, mcp: CustomerMcp, runId: string, ready: (steps: Json[]) => boolean): Promise<Json[]> {
  const steps = await waitFor("step 1 recorded and step 2's call held", 30_000, async () => {
    if (!received(mcp).some((c) => c.name === "track")) return undefined;
    const steps = stepsOf(await getRun(first, runId));
    return ready(steps) ? steps : undefined;
  }, 20);
  await first.kill();
  return steps;
}

// Watches the run on `on` until it ends; every message's run.
function watch(on: Serve, id: string): Promise<Run[]> {
  const client = createClient(PlatformService, createConnectTransport({ baseUrl: on.url, httpVersion: "1.1" }));
  return (async () => {
    const runs: Run[] = [];
    for await (const m of client.watchRun({ id }, { headers: { authorization: `Bearer ${token}`, "x-platform-tenant": "acme" } })) runs.push(m.run!);
    return runs;
  })();
}

const resumedTotal = async (on: Serve, kind: string) => sampleValue(await on.scrape(), "agentplane_run_steps_resumed_total", { kind });

describe.each(ENGINES)("durable steps on $name", (engine) => {
  let mcp: CustomerMcp;
  let model: ModelServer | undefined;
  let release: (() => void) | undefined;

  beforeEach(async () => {
    mcp = await startOpenMcp();
  });
  afterEach(async () => {
    release?.();
    await CliProcess.killAll();
    await model?.close();
    model = undefined;
    await mcp.close();
  });

  it("a plan agent killed after step 1 resumes at step 2: step 1's call is made once, step 2's again with its key", async () => {
    const env = await engine.env();
    const first = await serve(env);
    const { skill } = await first.call<{ skill: { id: string } }>("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } });
    const { agent } = await first.call<{ agent: { id: string } }>("CreateAgent", {
      agent: {
        name: "plan",
        skillIds: [skill.id],
        steps: [
          { skillId: skill.id, tool: "add", arguments: '{"a": input.n, "b": 1}' },
          { skillId: skill.id, tool: "track", arguments: '{"key": "plan-" & $string(steps[0].result.sum), "ms": 0}' },
          { skillId: skill.id, tool: "echo", arguments: '{"text": "sum " & $string(steps[0].result.sum)}' },
        ],
      },
    });
    release = mcp.holdTrack();
    const { run } = await first.call<{ run: { id: string } }>("RunAgent", { id: agent.id, input: { n: 41 } });
    const atKill = await killMidStep(first, mcp, run.id, (s) => s[0]?.status === "STEP_STATUS_SUCCEEDED" && s.length === 2);
    expect(atKill.map((s) => [s.tool, s.status])).toEqual([["add", "STEP_STATUS_SUCCEEDED"], ["track", "STEP_STATUS_RUNNING"]]);
    release();

    const second = await serve(env);
    const watched = watch(second, run.id);
    const done = await waitFor("the run to succeed on the second process", 30_000, async () => {
      const r = await getRun(second, run.id);
      return r.status === "RUN_STATUS_SUCCEEDED" ? r : undefined;
    }, 50);

    // add once; track again with the same key; echo once, from add's reused result.
    const calls = received(mcp);
    expect(calls.map((c) => c.name)).toEqual(["add", "track", "track", "echo"]);
    expect(calls[2]!.key).toBe(calls[1]!.key);
    expect(mcp.toolCalls().find((c) => c.name === "echo")).toEqual({ name: "echo", arguments: { text: "sum 42" } });
    expect(done).toMatchObject({ attempt: 2, output: { text: "sum 42" } });

    // The record: attempt 1's two steps, then attempt 2's, step 1 resumed
    // from attempt 1 (its outcome reused, not executed again).
    const steps = stepsOf(done);
    expect(steps.map((s) => [s.attempt, s.tool, s.status, s.resumedFromAttempt ?? 0])).toEqual([
      [1, "add", "STEP_STATUS_SUCCEEDED", 0],
      [1, "track", "STEP_STATUS_FAILED", 0],
      [2, "add", "STEP_STATUS_SUCCEEDED", 1],
      [2, "track", "STEP_STATUS_SUCCEEDED", 0],
      [2, "echo", "STEP_STATUS_SUCCEEDED", 0],
    ]);
    expect(steps[2]).toMatchObject({ arguments: { a: 41, b: 1 }, result: { sum: 42 } });
    expect(steps[2]!.callAttempts ?? []).toEqual([]);

    // WatchRun shows it too.
    const streamed = await watched;
    expect(streamed.at(-1)!.steps.map((s) => s.resumedFromAttempt)).toEqual([0, 0, 1, 0, 0]);

    expect(await resumedTotal(second, "tool_call")).toBe(1);
    expect(await resumedTotal(second, "model_call")).toBe(0);
    await second.stop();
  });

  it("a model agent killed in its second turn replays the first turns' replies and tool results; only the held call is made again", async () => {
    const env = await engine.env();
    const script: ScriptedReply[] = [
      { toolCalls: [{ name: "tools__echo", arguments: { text: "a" } }] },
      { toolCalls: [{ name: "tools__track", arguments: { key: "model", ms: 0 } }] },
      { content: "done" },
    ];
    model = await startModelServer((_request, index) => script[index] ?? { content: `unexpected request ${index}` });
    const first = await serve(env);
    const { skill } = await first.call<{ skill: { id: string } }>("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } });
    const { agent } = await first.call<{ agent: { id: string } }>("CreateAgent", {
      agent: { name: "assistant", skillIds: [skill.id], model: { baseUrl: model.baseUrl, model: "scripted" } },
    });
    release = mcp.holdTrack();
    const { run } = await first.call<{ run: { id: string } }>("RunAgent", { id: agent.id, input: { q: 1 } });
    const atKill = await killMidStep(first, mcp, run.id, (s) => s.length === 4 && s[1]?.status === "STEP_STATUS_SUCCEEDED" && s[2]?.status === "STEP_STATUS_SUCCEEDED");
    expect(atKill.map((s) => [s.kind, s.status])).toEqual([
      ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED"],
      ["STEP_KIND_TOOL_CALL", "STEP_STATUS_SUCCEEDED"],
      ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED"],
      ["STEP_KIND_TOOL_CALL", "STEP_STATUS_RUNNING"],
    ]);
    release();

    const second = await serve(env);
    const watched = watch(second, run.id);
    const done = await waitFor("the run to succeed on the second process", 30_000, async () => {
      const r = await getRun(second, run.id);
      return r.status === "RUN_STATUS_SUCCEEDED" ? r : undefined;
    }, 50);
    expect(done).toMatchObject({ attempt: 2, output: "done" });

    // The model was asked for turns 1 and 2 once (attempt 1) and for turn 3
    // once (attempt 2), with the conversation as attempt 1 left it.
    const requests = model.requests();
    expect(requests).toHaveLength(3);
    expect(requests[2]!.messages.slice(1)).toMatchObject([
      { role: "assistant", tool_calls: [{ id: "call_1", type: "function", function: { name: "tools__echo", arguments: '{"text":"a"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: JSON.stringify({ text: "a" }) },
      { role: "assistant", tool_calls: [{ id: "call_2", type: "function", function: { name: "tools__track", arguments: '{"key":"model","ms":0}' } }] },
      { role: "tool", tool_call_id: "call_2", content: JSON.stringify("tracked") },
    ]);
    // echo once; track again with the same key.
    const calls = received(mcp);
    expect(calls.map((c) => c.name)).toEqual(["echo", "track", "track"]);
    expect(calls[2]!.key).toBe(calls[1]!.key);

    const steps = stepsOf(done).filter((s) => s.attempt === 2);
    expect(steps.map((s) => [s.kind, s.status, s.resumedFromAttempt ?? 0])).toEqual([
      ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED", 1],
      ["STEP_KIND_TOOL_CALL", "STEP_STATUS_SUCCEEDED", 1],
      ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED", 1],
      ["STEP_KIND_TOOL_CALL", "STEP_STATUS_SUCCEEDED", 0],
      ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED", 0],
    ]);
    expect(steps[1]).toMatchObject({ tool: "echo", result: { text: "a" } });

    const streamed = await watched;
    expect(streamed.at(-1)!.steps.filter((s) => s.attempt === 2).map((s) => s.resumedFromAttempt)).toEqual([1, 1, 1, 0, 0]);

    expect(await resumedTotal(second, "model_call")).toBe(2);
    expect(await resumedTotal(second, "tool_call")).toBe(1);
    await second.stop();
  });
});
