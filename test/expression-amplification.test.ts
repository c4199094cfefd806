// Expressions that amplify their input, at each place a tenant's expression
// runs (issue 19 item 2): a 55 KB webhook whose join is 228 M characters
// ended the process (every tenant) from a trigger filter, a source mapping
// or a plan step; now each fails with the size limit, as its caller shows
// it: the filter does not match, the mapping answers 400, the run fails with
// `expression_limit` on its first attempt and is not claimed again.
// Budgets are generous here so that the limit, not the clock, decides on a
// loaded machine; what other tenants see in time is bench/isolation's
// (its amplification phase), here what they see in answers.
import { AMPLIFIED, AMPLIFYING_FILTER, CONSTANT } from "../bench/lib/amplifying.js";
import type { CustomerMcp } from "./support/customer-mcp.js";
import { startTenantServer, tenantWebhooks, type TenantServer } from "./support/tenant-webhooks.js";

type Json = Record<string, unknown>;

let ctx: TenantServer;
const { must, post, healthzAround, tenantWithSource, tenantWithSkill, trigger, runToEnd } = tenantWebhooks(() => ctx);

beforeAll(async () => {
  ctx = await startTenantServer({ filter: { budgetMs: 5_000 }, stepBudgetMs: 10_000 });
});
afterAll(() => ctx.server.close());

it("a trigger filter does not match, and another tenant's webhooks and /healthz are unaffected", async () => {
  const noisy = await tenantWithSource("noisy");
  const quiet = await tenantWithSource("quiet");
  const hostile = await trigger("noisy", noisy.agentId, "amp.filter", AMPLIFYING_FILTER);
  const friendly = await trigger("noisy", noisy.agentId, "amp.filter", "payload.s != ''");
  await trigger("quiet", quiet.agentId, "order.*", "payload.total > 100");
  const { result, answers } = await healthzAround(async () => {
    const flood = Promise.all(Array.from({ length: 10 }, () => post(noisy.token, { event_type: "amp.filter", payload: AMPLIFIED })));
    const quiets: { status: number; body: Json }[] = [];
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

it("an amplifying filter evaluated inline is suspended after three failures, like one in the sandbox", async () => {
  const tenant = await tenantWithSource("repeat");
  const id = await trigger("repeat", tenant.agentId, "amp.again", AMPLIFYING_FILTER);
  const limited = async () => Number(/agentplane_expression_overruns_total\{use="filter",reason="limit"\} (\d+)/.exec(await (await fetch(`${ctx.server.url}/metrics`)).text())?.[1] ?? 0);
  for (let i = 0; i < 3; i++) expect((await post(tenant.token, { event_type: "amp.again", payload: AMPLIFIED })).status).toBe(202);
  const saved = (await must("GetTrigger", { id }, "repeat")).trigger as Json;
  expect(saved.filterError).toMatch(/^limit: .*not evaluated for 60 s/);
  // Suspended: the next events are answered without evaluating it.
  const before = await limited();
  for (let i = 0; i < 3; i++)
    expect(await post(tenant.token, { event_type: "amp.again", payload: AMPLIFIED })).toMatchObject({ status: 202, body: { matched_triggers: 0 } });
  expect(await limited()).toBe(before);
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
    ({ mcp, skillId } = await tenantWithSkill("plans"));
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
    const { result: run, answers } = await healthzAround(() => runToEnd(agent.id, input, "plans", 60_000));
    expect(run).toMatchObject({ status: "RUN_STATUS_FAILED", attempt: 1, error: expect.stringContaining("steps[0].arguments: expression_limit: ") });
    expect(answers).toBeGreaterThan(0);
    expect(mcp.toolCalls().length).toBe(calls);
    // The runtime thread that evaluated it is alive: the next run of the same tenant succeeds.
    const ok = (await must("CreateAgent", { agent: { name: `q ${n}`, skillIds: [skillId], steps: [{ skillId, tool: "echo", arguments: '{"text": "hi"}' }] } }, "plans")).agent as Json;
    expect(await runToEnd(ok.id, {}, "plans", 60_000)).toMatchObject({ status: "RUN_STATUS_SUCCEEDED" });
    // Failed is final: still one attempt, never queued again.
    expect((await must("GetRun", { id: run.id }, "plans")).run).toMatchObject({ status: "RUN_STATUS_FAILED", attempt: 1 });
  });
});
