// TestExpression (the console's "try it" panel, and an MCP client's way to
// test a filter before creating a trigger) through the real server over
// Connect, the REST mirror and the platform MCP endpoint: the run-time
// sandbox, budgets and rules, nothing saved, tenant admins only.
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { bearer, connectCall, type TestServer } from "./support/server.js";
import { platformMcpClient, startTwoTenantIdp, type TwoTenantIdp } from "./support/two-tenant-idp.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";
import { CPU_BUDGET_ONLY } from "./support/sandbox-processes.js";

type Json = Record<string, unknown>;

let idps: TwoTenantIdp;
let server: TestServer;
let token: Record<string, string>;
let acme: { sourceToken: string; eventId: string };
let globex: { sourceToken: string; eventId: string };

async function call(method: string, body: unknown, as = "admin", tenant = "acme") {
  return connectCall(server, method, body, bearer(token[as]!, tenant));
}

async function ok(method: string, body: unknown, as = "admin", tenant = "acme"): Promise<Json> {
  const res = await call(method, body, as, tenant);
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function post(sourceToken: string, body: unknown): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": sourceToken },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

// A source, an agent with a trigger on `order.*`, and one stored event.
async function setup(tenant: string, as: string) {
  const created = await ok("CreateWebhookSource", { webhookSource: { name: "shop" } }, as, tenant);
  const agent = (await ok("CreateAgent", { agent: { name: "fulfil", model: PLACEHOLDER_MODEL } }, as, tenant)).agent as Json;
  await ok("CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*" } } }, as, tenant);
  const sourceToken = created.token as string;
  const accepted = await post(sourceToken, { event_type: "order.created", payload: { total: 250, customer: { email: "a@example.com" } } });
  return { sourceToken, eventId: accepted.body.event_id as string };
}

beforeAll(async () => {
  idps = await startTwoTenantIdp();
  token = idps.token;
  server = await idps.start({
    expressions: { sandbox: CPU_BUDGET_ONLY, filter: { budgetMs: 50 }, stepBudgetMs: 300 },
    webhook: { maxBytes: 1024 * 1024, ratePerSecond: 10_000, burst: 10_000 },
  });
  acme = await setup("acme", "admin");
  globex = await setup("globex", "globex");
});
afterAll(async () => {
  await server?.close();
  await idps?.idp.stop();
});

describe("TestExpression", () => {
  it("evaluates a filter on a pasted payload and on a stored event, true and false", async () => {
    const filter = "payload.total > 100";
    expect(await ok("TestExpression", { kind: "EXPRESSION_KIND_FILTER", expression: filter, document: { total: 250 }, eventType: "order.created" })).toEqual({
      result: true,
      matched: true,
      budget: "0.050s",
    });
    expect(await ok("TestExpression", { kind: "EXPRESSION_KIND_FILTER", expression: filter, document: { total: 5 } })).toEqual({ result: false, budget: "0.050s" });
    expect(await ok("TestExpression", { kind: "EXPRESSION_KIND_FILTER", expression: "event_type = 'order.created' and payload.total = 250", eventId: acme.eventId })).toMatchObject({
      result: true,
      matched: true,
    });
  });

  it("gives a mapping's event, and says why a mapping's result is not one", async () => {
    const mapping = '{"event_type": "order." & body.kind, "payload": {"total": body.amount}}';
    expect(await ok("TestExpression", { kind: "EXPRESSION_KIND_MAPPING", expression: mapping, document: { kind: "paid", amount: 12 } })).toEqual({
      result: { event_type: "order.paid", payload: { total: 12 } },
      budget: "0.050s",
    });
    expect(await ok("TestExpression", { kind: "EXPRESSION_KIND_MAPPING", expression: "body.amount", document: { amount: 12 } })).toEqual({
      result: 12,
      error: { kind: "expression_error", message: 'must produce {"event_type": <dotted name>, "payload": <object>}' },
      budget: "0.050s",
    });
  });

  it("gives a step's arguments from a stored event as a run sees it, under the step budget", async () => {
    const res = await ok("TestExpression", { kind: "EXPRESSION_KIND_STEP_ARGUMENTS", expression: '{"to": event.payload.customer.email, "type": event.event_type, "prior": $count(steps)}', eventId: acme.eventId });
    expect(res).toEqual({ result: { to: "a@example.com", type: "order.created", prior: 0 }, budget: "0.300s" });
    const input = await ok("TestExpression", { kind: "EXPRESSION_KIND_STEP_ARGUMENTS", expression: "input.n", document: { n: 3 } });
    expect(input).toEqual({ result: 3, error: { kind: "expression_error", message: "must evaluate to an object, got 3" }, budget: "0.300s" });
  });

  it("answers a syntax error at its position and a regular expression RE2 cannot run, as expression_error", async () => {
    const syntax = await ok("TestExpression", { kind: "EXPRESSION_KIND_FILTER", expression: "payload.total >", document: {} });
    expect(syntax).toMatchObject({ error: { kind: "expression_error", position: expect.any(Number), message: expect.any(String) } });
    const regex = await ok("TestExpression", { kind: "EXPRESSION_KIND_FILTER", expression: "$contains(payload.s, /(a)\\1/)", document: { s: "aa" } });
    expect(regex).toMatchObject({ error: { kind: "expression_error", message: expect.stringMatching(/regular expression .* not supported/) } });
  });

  it("answers a hostile expression with its kind while another tenant's webhooks are still acknowledged", async () => {
    const endless = "( $f := function($x){ $f($x + 1) }; $f(0) )";
    const deep = "( $f := function($x){ 1 + $f($x + 1) }; $f(0) )";
    const tries = Promise.all([
      ...Array.from({ length: 4 }, () => ok("TestExpression", { kind: "EXPRESSION_KIND_FILTER", expression: endless, document: {} })),
      ok("TestExpression", { kind: "EXPRESSION_KIND_STEP_ARGUMENTS", expression: deep, document: {} }),
    ]);
    const theirs: { status: number; body: Json }[] = [];
    for (let i = 0; i < 5; i++) theirs.push(await post(globex.sourceToken, { event_type: "order.created", payload: { total: i } }));
    const answers = await tries;
    for (const a of answers.slice(0, 4)) expect(a).toMatchObject({ error: { kind: "expression_timeout" } });
    expect(answers[4]).toMatchObject({ error: { kind: "expression_limit" } });
    for (const r of theirs) expect(r).toMatchObject({ status: 202, body: { matched_triggers: 1 } });
  });

  it("refuses another tenant's event, a missing input and a missing kind", async () => {
    expect(await call("TestExpression", { kind: "EXPRESSION_KIND_FILTER", expression: "true", eventId: globex.eventId })).toMatchObject({ status: 404, body: { code: "not_found" } });
    expect(await call("TestExpression", { kind: "EXPRESSION_KIND_FILTER", expression: "true" })).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
    expect(await call("TestExpression", { expression: "true", document: {} })).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
  });

  it("refuses a viewer on Connect and REST, and saves nothing", async () => {
    const body = { kind: "EXPRESSION_KIND_FILTER", expression: "true", document: {} };
    expect(await call("TestExpression", body, "viewer")).toMatchObject({ status: 403, body: { code: "permission_denied" } });
    const rest = await fetch(`${server.url}/api/v1/test-expression`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(token.viewer!, "acme") },
      body: JSON.stringify(body),
    });
    expect(rest.status).toBe(403);
    const triggers = (await ok("ListTriggers", {})).triggers as Json[];
    expect(triggers).toHaveLength(1);
  });

  it("is served by the REST mirror to an admin", async () => {
    const rest = await fetch(`${server.url}/api/v1/test-expression`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(token.admin!, "acme") },
      body: JSON.stringify({ kind: "EXPRESSION_KIND_FILTER", expression: "payload.total > 100", event_id: acme.eventId }),
    });
    expect(rest.status).toBe(200);
    expect(await rest.json()).toMatchObject({ result: true, matched: true });
  });

  it("is a tool on the platform MCP endpoint for an admin, not for a viewer", async () => {
    const connect = (t: string) => platformMcpClient(server, t);
    const viewer = await connect(token.viewerMcp!);
    expect((await viewer.listTools()).tools.map((t) => t.name)).not.toContain("test_expression");
    await viewer.close();

    const admin = await connect(token.adminMcp!);
    const tool = (await admin.listTools()).tools.find((t) => t.name === "test_expression");
    expect(tool).toMatchObject({ annotations: { readOnlyHint: false, destructiveHint: false } });
    expect(tool!.description).toContain("tenant admin role");
    const result = (await admin.callTool({
      name: "test_expression",
      arguments: { kind: "EXPRESSION_KIND_FILTER", expression: "payload.total > 100", document: { total: 101 } },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ result: true, matched: true });
    await admin.close();
  });
});
