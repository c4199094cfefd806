// Durable steps (issue 20, SPEC §6): a run claimed again after its worker's
// process was killed resumes after its last completed step. The built
// `agentplane serve` executes a run of a plan agent and one of a model agent
// against real MCP SDK servers and a scripted model; each run's step 2 tool
// call is held in its MCP server, the process is killed (SIGKILL) once both
// runs' step 1 outcomes are recorded, and a second process on the same
// database claims the runs when their lease (1 s) expires. The completed step's tool call reaches the MCP server once,
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
        AGENTPLANE_WORKER_CONCURRENCY: "4",
        AGENTPLANE_LOG_LEVEL: "warn",
      },
      port,
      { token, tenant: "acme" },
    );
  }
}

async function serve(env: Record<string, string>): Promise<Serve> {
  const s = new Serve(env, await freeLoopbackPort());
  await s.ready("agentplane serve to be ready");
  return s;
}

const getRun = async (on: Serve, id: string) => (await on.call<{ run: Json }>("GetRun", { id })).run;
const stepsOf = (run: Json) => (run.steps ?? []) as Json[];

// The tools/calls an MCP server received: name and idempotency key.
const received = (mcp: CustomerMcp) => mcp.toolCallRequests().map((c) => ({ name: c.name, key: c.meta?.[META] as string }));

// Watches the run on `on` until it ends; every message's run.
function watch(on: Serve, id: string): Promise<Run[]> {
  const client = createClient(PlatformService, createConnectTransport({ baseUrl: on.url, httpVersion: "1.1" }));
  return (async () => {
    const runs: Run[] = [];
    for await (const m of client.watchRun({ id }, { headers: { authorization: `Bearer ${token}`, "x-platform-tenant": "acme" } })) runs.push(m.run!);
    return runs;
  })();
}

const succeeded = (on: Serve, id: string) =>
  waitFor(`run ${id} to succeed on the second process`, 30_000, async () => {
    const r = await getRun(on, id);
    return r.status === "RUN_STATUS_SUCCEEDED" ? r : undefined;
  }, 50);

const resumedTotal = async (on: Serve, kind: string) => sampleValue(await on.scrape(), "agentplane_run_steps_resumed_total", { kind });

// Each agent's tools are on an MCP server of its own, so each run's calls
// are told apart.
async function skillOn(on: Serve, mcp: CustomerMcp, name: string): Promise<string> {
  return (await on.call<{ skill: { id: string } }>("CreateSkill", { skill: { name, mcpUrl: mcp.url } })).skill.id;
}

describe.each(ENGINES)("durable steps on $name", (engine) => {
  let planMcp: CustomerMcp;
  let chatMcp: CustomerMcp;
  let model: ModelServer;
  const holds: (() => void)[] = [];

  // The model agent's script: echo, then track (held), then its answer.
  const script: ScriptedReply[] = [
    { toolCalls: [{ name: "tools__echo", arguments: { text: "a" } }] },
    { toolCalls: [{ name: "tools__track", arguments: { key: "model", ms: 0 } }] },
    { content: "done" },
  ];

  beforeEach(async () => {
    planMcp = await startOpenMcp();
    chatMcp = await startOpenMcp();
    model = await startModelServer((_request, index) => script[index] ?? { content: `unexpected request ${index}` });
  });
  afterEach(async () => {
    for (const release of holds.splice(0)) release();
    await CliProcess.killAll();
    await Promise.all([model.close(), planMcp.close(), chatMcp.close()]);
  });

  it("a killed process's plan and model runs resume at step 2: completed calls are made once, the held ones again with their keys", async () => {
    const env = await engine.env();
    const first = await serve(env);
    const planSkill = await skillOn(first, planMcp, "plan-tools");
    const chatSkill = await skillOn(first, chatMcp, "tools");
    const plan = (
      await first.call<{ agent: { id: string } }>("CreateAgent", {
        agent: {
          name: "plan",
          skillIds: [planSkill],
          steps: [
            { skillId: planSkill, tool: "add", arguments: '{"a": input.n, "b": 1}' },
            { skillId: planSkill, tool: "track", arguments: '{"key": "plan-" & $string(steps[0].result.sum), "ms": 0}' },
            { skillId: planSkill, tool: "echo", arguments: '{"text": "sum " & $string(steps[0].result.sum)}' },
          ],
        },
      })
    ).agent.id;
    const chat = (
      await first.call<{ agent: { id: string } }>("CreateAgent", {
        agent: { name: "assistant", skillIds: [chatSkill], model: { baseUrl: model.baseUrl, model: "scripted" } },
      })
    ).agent.id;
    holds.push(planMcp.holdTrack(), chatMcp.holdTrack());
    const planRun = (await first.call<{ run: { id: string } }>("RunAgent", { id: plan, input: { n: 41 } })).run.id;
    const chatRun = (await first.call<{ run: { id: string } }>("RunAgent", { id: chat, input: { q: 1 } })).run.id;

    // Kill once both records show step 1's outcome and both step 2 calls
    // are held in the MCP servers: nothing can end them between the look
    // and the kill, however slow the machine.
    const status = (steps: Json[]) => steps.map((s) => [s.kind === "STEP_KIND_MODEL_CALL" ? "model" : s.tool, s.status]);
    const atKill = await waitFor("step 1 recorded and step 2's call held, in both runs", 30_000, async () => {
      if (![planMcp, chatMcp].every((mcp) => received(mcp).some((c) => c.name === "track"))) return undefined;
      const planSteps = stepsOf(await getRun(first, planRun));
      const chatSteps = stepsOf(await getRun(first, chatRun));
      const ready = planSteps.length === 2 && planSteps[0]!.status === "STEP_STATUS_SUCCEEDED" && chatSteps.length === 4 && chatSteps[2]!.status === "STEP_STATUS_SUCCEEDED";
      return ready ? { plan: status(planSteps), chat: status(chatSteps) } : undefined;
    }, 20);
    await first.kill();
    expect(atKill).toEqual({
      plan: [["add", "STEP_STATUS_SUCCEEDED"], ["track", "STEP_STATUS_RUNNING"]],
      chat: [["model", "STEP_STATUS_SUCCEEDED"], ["echo", "STEP_STATUS_SUCCEEDED"], ["model", "STEP_STATUS_SUCCEEDED"], ["track", "STEP_STATUS_RUNNING"]],
    });
    for (const release of holds.splice(0)) release();

    const second = await serve(env);
    const watched = { plan: watch(second, planRun), chat: watch(second, chatRun) };
    const planDone = await succeeded(second, planRun);
    const chatDone = await succeeded(second, chatRun);

    // The plan: add once; track again with the same key; echo once, from
    // add's reused result.
    const planCalls = received(planMcp);
    expect(planCalls.map((c) => c.name)).toEqual(["add", "track", "track", "echo"]);
    expect(planCalls[2]!.key).toBe(planCalls[1]!.key);
    expect(planMcp.toolCalls().find((c) => c.name === "echo")).toEqual({ name: "echo", arguments: { text: "sum 42" } });
    expect(planDone).toMatchObject({ attempt: 2, output: { text: "sum 42" } });
    // Its record: attempt 1's two steps, then attempt 2's, step 1 resumed
    // from attempt 1 (its outcome reused, not executed again).
    const planSteps = stepsOf(planDone);
    expect(planSteps.map((s) => [s.attempt, s.tool, s.status, s.resumedFromAttempt ?? 0])).toEqual([
      [1, "add", "STEP_STATUS_SUCCEEDED", 0],
      [1, "track", "STEP_STATUS_FAILED", 0],
      [2, "add", "STEP_STATUS_SUCCEEDED", 1],
      [2, "track", "STEP_STATUS_SUCCEEDED", 0],
      [2, "echo", "STEP_STATUS_SUCCEEDED", 0],
    ]);
    expect(planSteps[2]).toMatchObject({ arguments: { a: 41, b: 1 }, result: { sum: 42 } });
    expect(planSteps[2]!.callAttempts ?? []).toEqual([]);

    // The model agent: asked for turns 1 and 2 once (attempt 1) and for
    // turn 3 once (attempt 2), with the conversation as attempt 1 left it.
    expect(chatDone).toMatchObject({ attempt: 2, output: "done" });
    const requests = model.requests();
    expect(requests).toHaveLength(3);
    expect(requests[2]!.messages.slice(1)).toMatchObject([
      { role: "assistant", tool_calls: [{ id: "call_1", type: "function", function: { name: "tools__echo", arguments: '{"text":"a"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: JSON.stringify({ text: "a" }) },
      { role: "assistant", tool_calls: [{ id: "call_2", type: "function", function: { name: "tools__track", arguments: '{"key":"model","ms":0}' } }] },
      { role: "tool", tool_call_id: "call_2", content: JSON.stringify("tracked") },
    ]);
    // echo once; track again with the same key.
    const chatCalls = received(chatMcp);
    expect(chatCalls.map((c) => c.name)).toEqual(["echo", "track", "track"]);
    expect(chatCalls[2]!.key).toBe(chatCalls[1]!.key);
    const chatSteps = stepsOf(chatDone).filter((s) => s.attempt === 2);
    expect(chatSteps.map((s) => [s.kind, s.status, s.resumedFromAttempt ?? 0])).toEqual([
      ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED", 1],
      ["STEP_KIND_TOOL_CALL", "STEP_STATUS_SUCCEEDED", 1],
      ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED", 1],
      ["STEP_KIND_TOOL_CALL", "STEP_STATUS_SUCCEEDED", 0],
      ["STEP_KIND_MODEL_CALL", "STEP_STATUS_SUCCEEDED", 0],
    ]);
    expect(chatSteps[1]).toMatchObject({ tool: "echo", result: { text: "a" } });

    // WatchRun shows the resumed steps too.
    expect((await watched.plan).at(-1)!.steps.map((s) => s.resumedFromAttempt)).toEqual([0, 0, 1, 0, 0]);
    expect((await watched.chat).at(-1)!.steps.filter((s) => s.attempt === 2).map((s) => s.resumedFromAttempt)).toEqual([1, 1, 1, 0, 0]);

    // Counted: the plan's add and the model agent's echo; its two turns.
    expect(await resumedTotal(second, "tool_call")).toBe(2);
    expect(await resumedTotal(second, "model_call")).toBe(2);
    await second.stop();
  });
});
