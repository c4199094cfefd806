// Expressions that amplify their input, at each place a tenant's expression
// runs (issue 19 item 2): a 55 KB webhook whose join is 228 M characters
// ended the process (every tenant) from a trigger filter, a source mapping
// or a plan step; now each fails with the size limit, as its caller shows
// it: the filter does not match, the mapping answers 400, the run fails with
// `expression_limit` on its first attempt and is not claimed again.
// Budgets are generous here so that the limit, not the clock, decides on a
// loaded machine; what other tenants see in time is bench/isolation's
// (its amplification phase), here what they see in answers.
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { AMPLIFIED, AMPLIFYING_FILTER, CONSTANT } from "../bench/lib/amplifying.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let admin: string;
let server: TestServer;

async function must(method: string, body: unknown, tenant: string): Promise<Json> {
  const res = await connectCall(server, method, body, bearer(admin, tenant));
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function post(token: string, body: unknown): Promise<{ status: number; body: Json; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json, ms: Date.now() - started };
}

// Polls /healthz every 20 ms while `work` runs (each answer must be 200: the
// process is there); returns how many answers came.
async function healthzAround<T>(work: () => Promise<T>): Promise<{ result: T; answers: number }> {
  let answers = 0;
  let done = false;
  const poll = (async () => {
    while (!done) {
      const res = await fetch(`${server.url}/healthz`);
      await res.arrayBuffer();
      expect(res.status).toBe(200);
      answers++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    return { result: await work(), answers };
  } finally {
    done = true;
    await poll;
  }
}

async function tenantWithSource(slug: string, mapping?: string): Promise<{ token: string; agentId: string }> {
  await server.seedTenant(slug, [{ subject: issuer.clientId, role: "admin" }]);
  const { token } = await must("CreateWebhookSource", { webhookSource: { name: "in", mapping } }, slug);
  const agent = (await must("CreateAgent", { agent: { name: "a", model: PLACEHOLDER_MODEL } }, slug)).agent as Json;
  return { token: token as string, agentId: agent.id as string };
}

async function trigger(slug: string, agentId: string, pattern: string, filter?: string): Promise<string> {
  const body = await must("CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: pattern, filter } } }, slug);
  return (body.trigger as Json).id as string;
}

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  server = await startServer({
    authenticator: issuer.authenticator(60),
    webhook: { maxBytes: 1024 * 1024, ratePerSecond: 10_000, burst: 10_000 },
    outboundAllow: ["127.0.0.0/8"],
    runtime: { executor: "agents", concurrency: 4 },
    expressions: { filter: { budgetMs: 5_000 }, stepBudgetMs: 10_000 },
  });
});
afterAll(() => server.close());

it("a trigger filter does not match, and another tenant's webhooks and /healthz are unaffected", async () => {
  const noisy = await tenantWithSource("noisy");
  const quiet = await tenantWithSource("quiet");
  const hostile = await trigger("noisy", noisy.agentId, "amp.filter", AMPLIFYING_FILTER);
  const friendly = await trigger("noisy", noisy.agentId, "amp.filter", "payload.s != ''");
  await trigger("quiet", quiet.agentId, "order.*", "payload.total > 100");
  const { result, answers } = await healthzAround(async () => {
    const flood = Promise.all(Array.from({ length: 10 }, () => post(noisy.token, { event_type: "amp.filter", payload: AMPLIFIED })));
    const quiets: { status: number; body: Json; ms: number }[] = [];
    for (let i = 0; i < 10; i++) quiets.push(await post(quiet.token, { event_type: "order.created", payload: { total: 250 } }));
    return { noisy: await flood, quiets };
  });
  for (const r of result.noisy) expect(r).toMatchObject({ status: 202, body: { matched_triggers: 1 } });
  const event = (await must("GetEvent", { id: result.noisy[0]!.body.event_id }, "noisy")).event as Json;
  expect(event.matchedTriggerIds).toEqual([friendly]);
  for (const r of result.quiets) expect(r).toMatchObject({ status: 202, body: { matched_triggers: 1 } });
  expect(answers).toBeGreaterThan(0);
  const saved = (await must("GetTrigger", { id: hostile }, "noisy")).trigger as Json;
  expect(saved.filterError).toMatch(/^limit: \$join would build 227981000 characters/);
});

it("a source mapping answers 400 expression_limit and stores nothing", async () => {
  const mapping = '{"event_type": "amp.mapped", "payload": {"n": $length($join(body.payload.w, body.payload.s))}}';
  const { token } = await tenantWithSource("mapper", mapping);
  const res = await post(token, { event_type: "amp.mapped", payload: AMPLIFIED });
  expect(res).toMatchObject({ status: 400, body: { error: "invalid_argument", message: expect.stringMatching(/^mapping: expression_limit: \$join would build/) } });
  expect((await must("ListEvents", {}, "mapper")).events ?? []).toEqual([]);
});

describe("plan step arguments", () => {
  let mcp: CustomerMcp;
  let skillId: string;

  beforeAll(async () => {
    await server.seedTenant("plans", [{ subject: issuer.clientId, role: "admin" }]);
    mcp = await startOpenMcp();
    skillId = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } }, "plans")).skill as Json).id as string;
  });
  afterAll(() => mcp.close());

  // Names are unique in a tenant: each case's agents get their own.
  let cases = 0;
  it.each([
    ["an amplifying join of the input", '{"text": $string($length($join(input.w, input.s)))}', AMPLIFIED],
    ["a 5.4 KB constant", `{"text": $string(${CONSTANT})}`, { n: 1 }],
  ])("fail the run on %s with expression_limit, on its first attempt, and it is not claimed again", async (_name, args, input) => {
    const n = ++cases;
    const agent = (await must("CreateAgent", { agent: { name: `p ${n}`, skillIds: [skillId], timeout: "60s", steps: [{ skillId, tool: "echo", arguments: args }] } }, "plans")).agent as Json;
    const calls = mcp.toolCalls().length;
    const { result: run, answers } = await healthzAround(async () => {
      const queued = (await must("RunAgent", { id: agent.id, input }, "plans")).run as Json;
      for (;;) {
        const run = (await must("GetRun", { id: queued.id }, "plans")).run as Json;
        if (!["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string)) return run;
        await new Promise((r) => setTimeout(r, 25));
      }
    });
    expect(run).toMatchObject({ status: "RUN_STATUS_FAILED", attempt: 1, error: expect.stringContaining("steps[0].arguments: expression_limit: ") });
    expect(answers).toBeGreaterThan(0);
    expect(mcp.toolCalls().length).toBe(calls);
    // The runtime thread that evaluated it is alive: the next run of the same tenant succeeds.
    const ok = (await must("CreateAgent", { agent: { name: `q ${n}`, skillIds: [skillId], steps: [{ skillId, tool: "echo", arguments: '{"text": "hi"}' }] } }, "plans")).agent as Json;
    const next = (await must("RunAgent", { id: ok.id, input: {} }, "plans")).run as Json;
    for (;;) {
      const r = (await must("GetRun", { id: next.id }, "plans")).run as Json;
      if (r.status === "RUN_STATUS_SUCCEEDED") break;
      expect(["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"]).toContain(r.status);
      await new Promise((res) => setTimeout(res, 25));
    }
    // Failed is final: still one attempt, never queued again.
    expect((await must("GetRun", { id: run.id }, "plans")).run).toMatchObject({ status: "RUN_STATUS_FAILED", attempt: 1 });
  });
});
