// Tenant-authored JSONata under a budget (issue 9, findings 2 and 3): trigger
// filters at ingest and plan step arguments run in the expression sandbox, so
// an endless, huge or backtracking expression costs its own tenant a bounded
// amount and never stalls the process: /healthz answers, other tenants'
// webhooks are acknowledged, and the failure is visible where operators look.
import type { CustomerMcp } from "./support/customer-mcp.js";
import { bearer, connectCall } from "./support/server.js";
import { startTenantServer, tenantWebhooks, type TenantServer } from "./support/tenant-webhooks.js";
import { PATIENCE_MS, waitFor } from "./support/wait.js";
import { CPU_BUDGET_ONLY, sandboxPids, starve } from "./support/sandbox-processes.js";

type Json = Record<string, unknown>;

// Each of these stalled the process before the sandbox (endless loop, a huge
// range, exponential backtracking, a quadratic builtin, a huge allocation).
const HOSTILE_FILTERS: Record<string, string> = {
  endless: "( $f := function($x){ $f($x + 1) }; $f(0) )",
  "huge range": "$count([1..9000000].($*2)) > 0",
  backtracking: "$contains(payload.subject, /^(a+)+$/)",
  quadratic: "$count($distinct(payload.items)) > 1",
  allocation: "$length($pad('', 300000000)) > 0",
  recursion: "( $f := function($x){ 1 + $f($x + 1) }; $f(0) )",
};
const HOSTILE_PAYLOAD = { subject: "a".repeat(32) + "!", items: Array.from({ length: 20_000 }, (_, i) => ({ i })) };

let ctx: TenantServer;
// This process's sandbox processes before the server started its own.
let before: number[];
const { must, post, tenantWithSource, tenantWithSkill, trigger, runToEnd } = tenantWebhooks(() => ctx);

beforeAll(async () => {
  before = sandboxPids();
  ctx = await startTenantServer({ sandbox: CPU_BUDGET_ONLY, filter: { budgetMs: 50 }, stepBudgetMs: 300 });
});
// A test that failed while it had them stopped (a timeout skips its `finally`).
let resume = () => {};
afterAll(() => {
  resume();
  return ctx.server.close();
});

// Expressions of `use` handed to a sandbox process so far (this server's metric).
const placed = async (use: "filter" | "step") =>
  Number(new RegExp(`agentplane_expression_evaluations_total\\{use="${use}",where="sandbox"\\} (\\d+)`).exec(await (await fetch(`${ctx.server.url}/metrics`)).text())?.[1] ?? 0);

// Does `work` with the sandbox processes stopped (SIGSTOP) until its
// expression has been handed to one of them, then asks /healthz: the
// service's own thread must answer while that expression cannot have ended.
// Ordered, not timed. An expression refused or evaluated on the service's
// thread (bounded, or past a size limit) never reaches a process: then
// `work` ends first, and that it ended is the answer. `meanwhile`: what
// else must be done before then. Answers whether it reached one.
async function answersWhileEvaluating<T>(
  use: "filter" | "step",
  work: () => Promise<T>,
  meanwhile?: () => Promise<void>,
): Promise<{ result: T; inProcess: boolean }> {
  const handed = await placed(use);
  resume = starve(before);
  let ended = false;
  const working = work().finally(() => (ended = true));
  working.catch(() => {}); // awaited below, once the processes go on
  let inProcess: boolean;
  try {
    inProcess = await waitFor(`the ${use} expression in a sandbox process, or its work's end`, PATIENCE_MS, async () =>
      ended ? false : (await placed(use)) > handed ? true : undefined,
    );
    if (inProcess) {
      await meanwhile?.();
      expect((await fetch(`${ctx.server.url}/healthz`)).status).toBe(200);
      expect(ended).toBe(false);
    }
  } finally {
    resume();
  }
  return { result: await working, inProcess };
}

describe("trigger filters under a budget", () => {
  let evil: { token: string; agentId: string };

  beforeAll(async () => {
    evil = await tenantWithSource("evil");
  });

  it.each(Object.keys(HOSTILE_FILTERS))("a %s filter does not match, and the process keeps answering", async (name) => {
    const hostile = await trigger("evil", evil.agentId, `hostile.${name.replace(/ /g, "-")}`, HOSTILE_FILTERS[name]);
    const friendly = await trigger("evil", evil.agentId, `hostile.${name.replace(/ /g, "-")}`, "payload.subject != ''");
    const { result, inProcess } = await answersWhileEvaluating("filter", () =>
      post(evil.token, { event_type: `hostile.${name.replace(/ /g, "-")}`, payload: HOSTILE_PAYLOAD }),
    );
    // Never on the service's thread but a linear-time regular expression.
    expect(inProcess).toBe(name !== "backtracking");
    expect(result.status).toBe(202);
    // The tenant's well-behaved trigger on the same event still matched.
    expect(result.body.matched_triggers).toBe(1);
    const event = (await must("GetEvent", { id: result.body.event_id }, "evil")).event as Json;
    expect(event.matchedTriggerIds).toEqual([friendly]);
    // That its own webhook was answered at all is the budget's work:
    // unbudgeted, these never end or compute for minutes. What cut each off
    // is its filter error below.
    if (name === "backtracking") return; // linear-time regex: it simply does not match
    const saved = (await must("GetTrigger", { id: hostile }, "evil")).trigger as Json;
    expect(saved.filterError).toMatch(/^(timeout|depth|memory|limit): /);
    expect(Date.parse(saved.filterErrorTime as string)).toBeGreaterThan(Date.now() - 60_000);
  });

  it("stops evaluating the filters of an event whose sender went away, and stores nothing of it", async () => {
    const gone = await tenantWithSource("gone");
    // Twenty filters cut off at their budget one after another (a tenant
    // gets one process at a time while another is free): over a second of
    // CPU time, which the sender does not wait for.
    for (let i = 0; i < 20; i++) await trigger("gone", gone.agentId, "slow.*", HOSTILE_FILTERS.endless);
    // Not inline (a range): it queues behind what is left of the slow event's filters.
    await trigger("gone", gone.agentId, "mark.*", "$sum([1..3]) = 6");
    const overruns = async () => Number(/agentplane_expression_overruns_total\{use="filter",reason="timeout"\} (\d+)/.exec(await (await fetch(`${ctx.server.url}/metrics`)).text())?.[1] ?? 0);
    const before = await overruns();
    const sender = new AbortController();
    const slow = fetch(`${ctx.server.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": gone.token },
      body: JSON.stringify({ event_type: "slow.now", payload: {} }),
      signal: sender.signal,
    }).catch(() => "gone");
    // Its first filter was cut off at its budget: the sender gives up.
    await waitFor("the first filter's overrun", 60_000, async () => (await overruns()) > before || undefined);
    sender.abort();
    expect(await slow).toBe("gone");
    // The tenant's next event waits behind whatever of the first is left.
    expect(await post(gone.token, { event_type: "mark.now", payload: {} })).toMatchObject({ status: 202, body: { matched_triggers: 1 } });
    // Those that ran before the abort was seen, not all twenty (counted, not
    // timed: how many ran depends on how soon this test saw the first).
    expect((await overruns()) - before).toBeLessThan(20);
    const events = ((await must("ListEvents", {}, "gone")).events ?? []) as Json[];
    expect(events.map((e) => e.eventType)).toEqual(["mark.now"]);
  });

  it("suspends a filter that keeps overrunning, and counts it", async () => {
    const id = await trigger("evil", evil.agentId, "again.endless", HOSTILE_FILTERS.endless);
    for (let i = 0; i < 3; i++) expect((await post(evil.token, { event_type: "again.endless", payload: {} })).status).toBe(202);
    // Suspended: answered without evaluating (no budget spent, so no overrun).
    const overruns = async () => Number(/agentplane_expression_overruns_total\{use="filter",reason="timeout"\} (\d+)/.exec(await (await fetch(`${ctx.server.url}/metrics`)).text())?.[1]);
    const before = await overruns();
    expect(before).toBeGreaterThan(0);
    const res = await post(evil.token, { event_type: "again.endless", payload: {} });
    expect(res).toMatchObject({ status: 202, body: { matched_triggers: 0 } });
    expect(await overruns()).toBe(before);
    const saved = (await must("GetTrigger", { id }, "evil")).trigger as Json;
    expect(saved.filterError).toMatch(/not evaluated for 60 s/);
    const metrics = await (await fetch(`${ctx.server.url}/metrics`)).text();
    expect(metrics).toMatch(/agentplane_trigger_filter_failures_total\{reason="suspended"\} [1-9]/);
    // Editing the trigger clears the record and the suspension.
    const updated = (await must("UpdateTrigger", { trigger: { id, webhook: { eventTypePattern: "again.endless", filter: "true" } } }, "evil")).trigger as Json;
    expect(updated.filterError).toBeUndefined();
    expect((await post(evil.token, { event_type: "again.endless", payload: {} })).body.matched_triggers).toBe(1);
  });

  it("keeps another tenant's webhooks acknowledged while one tenant floods its worst filter", async () => {
    const good = await tenantWithSource("good");
    await trigger("good", good.agentId, "order.*", "payload.total > 100");
    await trigger("evil", evil.agentId, "flood.worst", HOSTILE_FILTERS.quadratic);
    // Ordered, not timed: the flood's filters wait in sandbox processes that
    // get no CPU at all (stopped) until the other tenant is done, so
    // whatever of them the other tenant's webhooks waited for, they would
    // wait for until the flood's are answered.
    const answered: string[] = [];
    const goods: { status: number; body: Json }[] = [];
    const { result: flood, inProcess } = await answersWhileEvaluating(
      "filter",
      () =>
        Promise.all(
          Array.from({ length: 30 }, () =>
            post(evil.token, { event_type: "flood.worst", payload: HOSTILE_PAYLOAD }).then((r) => (answered.push(`flood ${r.status}`), r)),
          ),
        ),
      async () => {
        for (let i = 0; i < 20; i++) goods.push(await post(good.token, { event_type: "order.created", payload: { total: 250 } }));
        // Those of the flood past its tenant's bytes in flight were refused;
        // none that were let in has been answered.
        expect(answered.filter((a) => a !== "flood 429")).toEqual([]);
      },
    );
    expect(inProcess).toBe(true);
    for (const r of goods) expect(r).toMatchObject({ status: 202, body: { matched_triggers: 1 } });
    const statuses = flood.map((r) => r.status);
    expect(statuses).toContain(202);
    for (const status of statuses) expect([202, 429]).toContain(status);
  });

  it("refuses, when saved, a regular expression the linear-time engine cannot run", async () => {
    const res = await connectCall(
      ctx.server,
      "CreateTrigger",
      { trigger: { agentId: evil.agentId, webhook: { eventTypePattern: "x.y", filter: "$contains(payload.s, /(a)\\1/)" } } },
      bearer(ctx.admin, "evil"),
    );
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: "invalid_argument", message: expect.stringMatching(/^trigger\.webhook\.filter: regular expression .* not supported/) });
  });
});

describe("plan step arguments under a budget", () => {
  let mcp: CustomerMcp;
  let skillId: string;

  beforeAll(async () => {
    ({ mcp, skillId } = await tenantWithSkill("plans"));
  });
  afterAll(() => mcp.close());

  // Names are unique in a tenant: each agent gets its own.
  let agents = 0;
  async function runWith(args: string): Promise<{ run: Json; inProcess: boolean }> {
    const agent = (await must("CreateAgent", { agent: { name: `p ${++agents}`, skillIds: [skillId], timeout: "20s", steps: [{ skillId, tool: "echo", arguments: args }] } }, "plans")).agent as Json;
    const { result, inProcess } = await answersWhileEvaluating("step", () => runToEnd(agent.id, { n: 1 }, "plans", 15_000));
    return { run: result, inProcess };
  }

  it.each([
    ["an endless", '( $f := function($x){ $f($x + 1) }; {"text": $string($f(0))} )', "expression_timeout"],
    ["a quadratic", '{"text": $string($count($distinct([1..60000].{"i": $})))}', "expression_timeout"],
    ["a too deep", '( $f := function($x){ 1 + $f($x + 1) }; {"text": $string($f(0))} )', "expression_limit"],
  ])("fails the run on %s expression, on its first attempt, without stalling anything", async (_name, args, kind) => {
    const { run, inProcess } = await runWith(args);
    expect(inProcess).toBe(true);
    expect(run).toMatchObject({ status: "RUN_STATUS_FAILED", attempt: 1, error: expect.stringContaining(`steps[0].arguments: ${kind}: `) });
    expect(mcp.toolCalls()).toEqual([]);
  });

  it("still runs ordinary arguments", async () => {
    const { run } = await runWith('{"text": "n=" & $string(input.n)}');
    expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED" });
  });
});
