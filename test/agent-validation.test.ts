// An agent that can never run is refused when it is saved, naming the field:
// no plan and no model, a tool the skill does not list, arguments that can
// never satisfy the tool's input schema. What depends on the event's payload
// is left to the run.
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { freeLoopbackPort } from "./support/listen.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let token: string;
let server: TestServer;
let mcp: CustomerMcp;
// A skill whose tools were listed (echo {text: string}, add {a, b: number},
// fail {}), and one whose server never answered (no stored list).
let listed: string;
let unlisted: string;

beforeAll(async () => {
  issuer = await devIssuer();
  token = await devToken(issuer);
  mcp = await startOpenMcp();
  server = await startServer({ authenticator: issuer.authenticator(60), outboundAllow: ["127.0.0.0/8"] });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  listed = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
  const nobody = `http://127.0.0.1:${await freeLoopbackPort()}/mcp`;
  const down = (await must("CreateSkill", { skill: { name: "down", mcpUrl: nobody } })).skill as Json;
  expect(down.toolsRefreshTime).toBeUndefined();
  unlisted = down.id as string;
});
afterAll(async () => {
  await server.close();
  await mcp.close();
});

const call = (method: string, body: unknown) => connectCall(server, method, body, bearer(token, "acme"));
async function must(method: string, body: unknown): Promise<Json> {
  const res = await call(method, body);
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
// Names are unique in a tenant: each agent gets its own.
let plans = 0;
const plan = (skillId: string, steps: { tool: string; arguments?: string }[]) => ({
  name: `plan ${++plans}`,
  skillIds: [skillId],
  steps: steps.map((s) => ({ skillId, ...s })),
});

function expectRefused(res: { status: number; body: Json }, field: string, ...parts: string[]) {
  expect(res.status).toBe(400);
  expect(res.body.code).toBe("invalid_argument");
  expect(res.body.message).toMatch(new RegExp(`^${field.replace(/[[\].]/g, "\\$&")}: `));
  for (const part of parts) expect(res.body.message).toContain(part);
}

it("refuses an agent with neither steps nor a model", async () => {
  expectRefused(await call("CreateAgent", { agent: { name: "idle" } }), "agent.steps", "model");
  const withModel = await call("CreateAgent", { agent: { name: "chat", model: { baseUrl: "https://model.example.com/v1", model: "m" } } });
  expect(withModel.status).toBe(200);
});

it("refuses a step naming a tool the skill's stored list lacks, saying how to refresh it", async () => {
  const res = await call("CreateAgent", { agent: plan(listed, [{ tool: "echo", arguments: '{"text": "hi"}' }, { tool: "ehco" }]) });
  expectRefused(res, "agent.steps[1].tool", '"ehco"', "echo, add, fail", "RefreshSkillTools");
  // Without a stored list nothing is known, and nothing is refused.
  expect((await call("CreateAgent", { agent: plan(unlisted, [{ tool: "anything", arguments: '{"x": 1}' }]) })).status).toBe(200);
});

it("refuses arguments that can never satisfy the tool's input schema", async () => {
  const cases: [string, string, string[]][] = [
    ["add", '{"b": 2}', ['"a"']],
    ["add", "", ['"a"']],
    ["add", '{"a": "one", "b": 2}', ['"a"', "number"]],
    ["add", '{"a": 1, "b": {"n": 2}}', ['"b"', "number"]],
    ["echo", '"hi"', ["object"]],
    ["echo", '["hi"]', ["object"]],
    ["echo", '{"text": 5}', ['"text"', "string"]],
  ];
  for (const [tool, args, parts] of cases) {
    const res = await call("CreateAgent", { agent: plan(listed, [{ tool, arguments: args }]) });
    expect({ tool, args, status: res.status }).toEqual({ tool, args, status: 400 });
    expectRefused(res, "agent.steps[0].arguments", `"${tool}"`, ...parts);
  }
});

it("accepts what depends on the event, the input or earlier steps", async () => {
  const fine: [string, string][] = [
    ["add", '{"a": 1, "b": 2}'],
    ["add", '{"a": event.payload.x, "b": 2}'],
    ["add", '{"a": $number(input.a), "b": event.payload.total * 2}'],
    ["add", "event.payload"],
    ["add", '{event.payload.key: 1, "b": 2}'],
    ["add", '($a := 1; {"a": $a, "b": 2})'],
    ["echo", '{"text": event.payload.text ? event.payload.text : "none"}'],
    ["echo", '{"text": "a" & event.payload.suffix}'],
    ["fail", ""],
  ];
  for (const [tool, args] of fine) {
    const res = await call("CreateAgent", { agent: plan(listed, [{ tool, arguments: args }]) });
    expect({ tool, args, status: res.status, body: res.status === 200 ? {} : res.body }).toEqual({ tool, args, status: 200, body: {} });
  }
  const chained = await call("CreateAgent", {
    agent: plan(listed, [{ tool: "add", arguments: '{"a": 1, "b": 2}' }, { tool: "add", arguments: '{"a": steps[0].result.sum, "b": 3}' }]),
  });
  expect(chained.status).toBe(200);
});

it("checks on update only when steps, model or skills change", async () => {
  const agent = (await must("CreateAgent", { agent: plan(listed, [{ tool: "echo", arguments: '{"text": "hi"}' }]) })).agent as Json;
  const badStep = await call("UpdateAgent", { agent: { id: agent.id, steps: [{ skillId: listed, tool: "nope" }] }, updateMask: "steps" });
  expectRefused(badStep, "agent.steps[0].tool", "RefreshSkillTools");
  const noPlan = await call("UpdateAgent", { agent: { id: agent.id, steps: [] }, updateMask: "steps" });
  expectRefused(noPlan, "agent.steps");

  // One saved before these checks (or before its skill's list changed)
  // stays editable in the fields that do not touch its plan.
  const t = Date.now();
  const tenantId = (await server.store.tenants.get("acme"))!.id;
  await server.store.agents.insert({
    id: "agt_legacy",
    tenantId,
    name: "legacy",
    description: "",
    instructions: "",
    spec: { skillIds: [listed], allowedTools: {}, steps: [{ skillId: listed, tool: "gone", arguments: "" }] },
    modelApiKey: null,
    maxSteps: 16,
    timeoutMs: 120_000,
    enabled: true,
    maxConcurrentRuns: null,
    createTime: t,
    updateTime: t,
  });
  const renamed = await call("UpdateAgent", { agent: { id: "agt_legacy", description: "still here" }, updateMask: "description" });
  expect(renamed.status).toBe(200);
  expectRefused(await call("UpdateAgent", { agent: { id: "agt_legacy", skillIds: [listed, unlisted] }, updateMask: "skillIds" }), "agent.steps[0].tool", '"gone"');
});
