// Domain metrics (issue 12) as an operator's Prometheus reads them from
// GET /metrics: webhook outcomes, runs by status and error kind, skill and
// model calls, schedule slots, token validation, queue depth and age, and a
// tenant label when asked for. Real server, real agent runtime, real MCP SDK
// server, a scripted model endpoint and identity providers on loopback; the
// dashboard and alert examples in docs/ checked against the live names.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as loadYaml } from "yaml";
import { createIntrospectionAuthenticator } from "../src/integrations/identity/introspection.js";
import { createJwtAuthenticator } from "../src/integrations/identity/jwt.js";
import { createLogger } from "../src/log.js";
import { createMetrics } from "../src/metrics.js";
import { Scheduler } from "../src/runtime/scheduler.js";
import { DEFAULT_QUOTAS } from "../src/service/limits.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { startSigningIdp, type SigningIdp } from "./support/jwks-server.js";
import { startModelServer, type ModelServer } from "./support/model-server.js";
import { duplicateFamilies, families, sampleValue } from "./support/prometheus.js";
import { startScriptedIdp, type ScriptedIdp } from "./support/scripted-introspection.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { sleep, waitFor } from "./support/wait.js";
import { CPU_BUDGET_ONLY } from "./support/sandbox-processes.js";

type Json = Record<string, unknown>;

const ISSUER = "https://idp.metrics.test";
const AUDIENCE = "https://api.metrics.test";
const OPERATOR = "ops";

let idp: SigningIdp;
let token: string;
let mcp: CustomerMcp;
let model: ModelServer;

beforeAll(async () => {
  idp = await startSigningIdp(ISSUER, AUDIENCE);
  token = await idp.sign(OPERATOR);
  mcp = await startOpenMcp();
  // Model "refused" answers 401; any other, one final answer with known usage.
  model = await startModelServer((request) =>
    request.model === "refused" ? { status: 401 } : { content: "done", usage: { prompt_tokens: 11, completion_tokens: 7 } },
  );
});

afterAll(async () => {
  await mcp.close();
  await model.close();
  await idp.close();
});

async function scrape(server: { url: string }): Promise<string> {
  const res = await fetch(`${server.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  return res.text();
}

async function call(server: TestServer, method: string, body: unknown, tenant: string, auth = token): Promise<Json> {
  const res = await connectCall(server, method, body, bearer(auth, tenant));
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function postEvent(server: { url: string }, sourceToken: string | undefined, body: string | Json, headers: Record<string, string> = {}): Promise<number> {
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(sourceToken ? { "x-webhook-token": sourceToken } : {}), ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

describe("domain metrics on one server (runs on its thread)", () => {
  let server: TestServer;
  const metrics = createMetrics();
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    const authenticator = createJwtAuthenticator({ issuer: ISSUER, audience: AUDIENCE, algorithms: ["RS256"], clockToleranceSeconds: 60, jwksUrl: idp.jwks.url, observer: metrics.observer });
    server = await startServer({
      authenticator,
      metrics,
      outboundAllow: ["127.0.0.0/8"],
      runtime: { executor: "agents" },
      webhook: { maxBytes: 2048, ratePerSecond: 1, burst: 10 },
      quotas: { ...DEFAULT_QUOTAS, queuedRuns: 5 },
      // The step overrun counted below is the CPU budget's.
      expressions: { sandbox: CPU_BUDGET_ONLY, stepBudgetMs: 100 },
    });
    await server.seedTenant("acme", [{ subject: OPERATOR, role: "admin" }]);
    const api = (method: string, body: unknown) => call(server, method, body, "acme");
    const skill = ((await api("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
    const agent = async (name: string, spec: Json) => ((await api("CreateAgent", { agent: { name, ...spec } })).agent as Json).id as string;
    const calling = (tool: string, args: string) => ({ skillIds: [skill], steps: [{ skillId: skill, tool, arguments: args }] });
    ids.echo = await agent("echo", calling("echo", '{"text": "hi"}'));
    ids.fail = await agent("fail", calling("fail", "{}"));
    ids.quadratic = await agent("quadratic", calling("echo", '{"text": $string($count($distinct([1..60000].{"i": $})))}'));
    ids.model = await agent("model", { model: { baseUrl: model.baseUrl, model: "small", apiKey: "k" } });
    ids.refused = await agent("refused", { model: { baseUrl: model.baseUrl, model: "refused", apiKey: "k" } });
    for (const [pattern, agentId] of [["order.created", ids.echo], ["order.failed", ids.fail]] as const)
      await api("CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: pattern } } });
    // One event matching six triggers passes the queued-runs quota of five.
    for (let i = 0; i < 6; i++) await api("CreateTrigger", { trigger: { agentId: ids.echo, webhook: { eventTypePattern: "bulk.event" } } });
    const source = async (name: string) => (await api("CreateWebhookSource", { webhookSource: { name } })).token as string;
    ids.source = await source("shop");
    ids.flood = await source("flood");
  });
  afterAll(() => server.close());

  it("starts with every webhook outcome and identity series at zero", async () => {
    const text = await scrape(server);
    for (const outcome of ["accepted", "duplicate", "unauthenticated", "invalid", "too_large", "unsupported_media_type", "rate_limited", "over_quota", "unavailable", "error"])
      expect(sampleValue(text, "agentplane_webhook_events_total", { outcome })).toBe(0);
    expect(sampleValue(text, "agentplane_schedule_slots_total", { outcome: "missed" })).toBe(0);
    expect(sampleValue(text, "agentplane_oauth_token_requests_total", { outcome: "ok" })).toBe(0);
    expect(sampleValue(text, "agentplane_introspection_requests_total", { outcome: "error" })).toBe(0);
    // The HTTP thread's own series and the domain ones, each family once.
    expect(families(text).get("agentplane_http_requests_total")).toBe("counter");
    expect(families(text).get("agentplane_process_cpu_seconds_total")).toBe("counter");
    expect(families(text).get("agentplane_run_duration_seconds")).toBe("histogram");
    expect(duplicateFamilies(text)).toEqual([]);
  });

  it("counts webhook events by outcome and the triggers they matched", async () => {
    const seen: Record<string, number> = {};
    const expect_ = async (outcome: string, status: number, sending: Promise<number>) => {
      expect(await sending).toBe(status);
      seen[outcome] = (seen[outcome] ?? 0) + 1;
    };
    const event = (type: string) => ({ event_type: type, payload: { n: 1 } });
    await expect_("accepted", 202, postEvent(server, ids.source, event("order.created"), { "idempotency-key": "k1" }));
    await expect_("duplicate", 200, postEvent(server, ids.source, event("order.created"), { "idempotency-key": "k1" }));
    await expect_("accepted", 202, postEvent(server, ids.source, event("order.failed")));
    await expect_("unauthenticated", 401, postEvent(server, "whk_not-a-token-of-any-source-at-all", event("order.created")));
    await expect_("unauthenticated", 401, postEvent(server, undefined, event("order.created")));
    await expect_("invalid", 400, postEvent(server, ids.source, {}));
    await expect_("invalid", 400, postEvent(server, ids.source, "{not json"));
    await expect_("too_large", 413, postEvent(server, ids.source, { event_type: "order.created", payload: { pad: "x".repeat(3000) } }));
    await expect_("unsupported_media_type", 415, postEvent(server, ids.source, "a=b", { "content-type": "text/plain" }));
    await expect_("over_quota", 429, postEvent(server, ids.source, event("bulk.event")));
    // The flood source's bucket holds 10: the 11th and 12th are refused.
    const flood = await Promise.all(Array.from({ length: 12 }, () => postEvent(server, ids.flood, event("noop"))));
    for (const status of flood) seen[status === 202 ? "accepted" : "rate_limited"] = (seen[status === 202 ? "accepted" : "rate_limited"] ?? 0) + 1;
    expect(flood.filter((s) => s === 429).length).toBeGreaterThanOrEqual(1);
    expect(flood.every((s) => s === 202 || s === 429)).toBe(true);

    const text = await scrape(server);
    for (const outcome of ["accepted", "duplicate", "unauthenticated", "invalid", "too_large", "unsupported_media_type", "rate_limited", "over_quota", "unavailable", "error"])
      expect([outcome, sampleValue(text, "agentplane_webhook_events_total", { outcome })]).toEqual([outcome, seen[outcome] ?? 0]);
    // order.created and order.failed matched one trigger each; the refused bulk event queued nothing.
    expect(sampleValue(text, "agentplane_triggers_matched_total")).toBe(2);
  });

  it("counts finished runs by status and error kind, their duration, and the skill and model calls in them", async () => {
    for (const id of [ids.quadratic, ids.model, ids.refused]) await call(server, "RunAgent", { id }, "acme");
    // The two webhook runs and these three.
    const text = await waitFor("five runs to be counted", 20_000, async () => {
      const t = await scrape(server);
      const total = ["none", "tool_error", "expression_timeout", "model_unauthorized"].reduce(
        (n, kind) => n + (sampleValue(t, "agentplane_runs_finished_total", { status: kind === "none" ? "succeeded" : "failed", error_kind: kind }) ?? 0),
        0,
      );
      return total >= 5 ? t : undefined;
    }, 100);
    expect(sampleValue(text, "agentplane_runs_finished_total", { status: "succeeded", error_kind: "none" })).toBe(2);
    expect(sampleValue(text, "agentplane_runs_finished_total", { status: "failed", error_kind: "tool_error" })).toBe(1);
    expect(sampleValue(text, "agentplane_runs_finished_total", { status: "failed", error_kind: "expression_timeout" })).toBe(1);
    expect(sampleValue(text, "agentplane_runs_finished_total", { status: "failed", error_kind: "model_unauthorized" })).toBe(1);
    expect(sampleValue(text, "agentplane_run_duration_seconds_count", { status: "succeeded" })).toBe(2);
    expect(sampleValue(text, "agentplane_run_duration_seconds_count", { status: "failed" })).toBe(3);
    expect(sampleValue(text, "agentplane_run_duration_seconds_bucket", { status: "failed", le: "+Inf" })).toBe(3);
    expect(sampleValue(text, "agentplane_run_duration_seconds_sum", { status: "succeeded" })).toBeGreaterThan(0);

    expect(sampleValue(text, "agentplane_skill_calls_total", { outcome: "ok" })).toBe(1);
    expect(sampleValue(text, "agentplane_skill_calls_total", { outcome: "tool_error" })).toBe(1);
    expect(sampleValue(text, "agentplane_skill_call_duration_seconds_count", { outcome: "ok" })).toBe(1);
    expect(sampleValue(text, "agentplane_model_calls_total", { outcome: "ok" })).toBe(1);
    expect(sampleValue(text, "agentplane_model_calls_total", { outcome: "model_unauthorized" })).toBe(1);
    expect(sampleValue(text, "agentplane_model_call_duration_seconds_count", { outcome: "ok" })).toBe(1);
    expect(sampleValue(text, "agentplane_model_tokens_total", { type: "prompt" })).toBe(11);
    expect(sampleValue(text, "agentplane_model_tokens_total", { type: "completion" })).toBe(7);
    expect(sampleValue(text, "agentplane_expression_overruns_total", { use: "step", reason: "timeout" })).toBe(1);
    // Nothing left waiting.
    expect(sampleValue(text, "agentplane_runs_queued")).toBe(0);
    expect(sampleValue(text, "agentplane_runs_queued_oldest_age_seconds")).toBe(0);
  });

  it("counts token validation: one JWKS fetch, then cache hits", async () => {
    const text = await scrape(server);
    expect(sampleValue(text, "agentplane_jwks_fetches_total", { outcome: "ok" })).toBe(1);
    expect(sampleValue(text, "agentplane_jwks_fetches_total", { outcome: "error" })).toBe(0);
    expect(sampleValue(text, "agentplane_token_cache_lookups_total", { result: "miss" })).toBe(1);
    expect(sampleValue(text, "agentplane_token_cache_lookups_total", { result: "hit" })).toBeGreaterThanOrEqual(10);
  });

  it("counts schedule slots fired, and those missed while no scheduler ran", async () => {
    const trigger = (await call(server, "CreateTrigger", { trigger: { agentId: ids.echo, schedule: { cron: "* * * * *" } } }, "acme")).trigger as Json;
    const created = Date.parse(trigger.createTime as string);
    const scheduler = new Scheduler({ store: server.store.schedules, log: createLogger("silent"), observer: metrics.observer });
    // Five and a half minutes later: the latest slot fires, the four before it were missed.
    expect((await scheduler.tick(created + 330_000)).fired).toBe(1);
    // Later in that same minute (created + 331 s crossed into the next one
    // whenever the trigger was created in a minute's last second): nothing new.
    expect((await scheduler.tick(Math.floor((created + 330_000) / 60_000) * 60_000 + 59_999)).fired).toBe(0);
    const text = await scrape(server);
    expect(sampleValue(text, "agentplane_schedule_slots_total", { outcome: "fired" })).toBe(1);
    const minuteOf = (t: number) => Math.floor(t / 60_000);
    expect(sampleValue(text, "agentplane_schedule_slots_total", { outcome: "missed" })).toBe(minuteOf(created + 330_000) - minuteOf(created) - 1);
    expect(sampleValue(text, "agentplane_schedule_slots_total", { outcome: "skipped" })).toBe(0);
  });

  it("docs/grafana-dashboard.json and docs/alerts.yml use only series this server exports", async () => {
    const exported = families(await scrape(server));
    const dashboard = JSON.parse(readFileSync(join(process.cwd(), "docs/grafana-dashboard.json"), "utf8")) as { title: string; panels: { title: string; targets?: { expr: string }[] }[] };
    expect(dashboard.title).toBeTruthy();
    const panelExprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    expect(panelExprs.length).toBeGreaterThanOrEqual(6);
    const alerts = loadYaml(readFileSync(join(process.cwd(), "docs/alerts.yml"), "utf8")) as { groups: { name: string; rules: { alert: string; expr: string; for?: string; labels?: Json; annotations?: Json }[] }[] };
    const rules = alerts.groups.flatMap((g) => g.rules);
    expect(rules.length).toBeGreaterThanOrEqual(4);
    for (const rule of rules) expect(rule).toMatchObject({ alert: expect.any(String), expr: expect.any(String), labels: { severity: expect.any(String) }, annotations: { summary: expect.any(String) } });
    const names = new Set([...panelExprs, ...rules.map((r) => r.expr)].flatMap((e) => e.match(/\bagentplane_[a-z0-9_]+/g) ?? []));
    expect(names.size).toBeGreaterThanOrEqual(10);
    const missing = [...names].filter((n) => !exported.has(n) && !exported.has(n.replace(/_(bucket|sum|count)$/, "")));
    expect(missing).toEqual([]);
  });
});

describe.each(["sqlite", "postgres"] as const)("queue depth and the tenant label (%s)", (engine) => {
  let server: TestServer;
  let idp: ScriptedIdp;
  const metrics = createMetrics({ tenantLabel: true, queueCacheMs: 0 });

  beforeAll(async () => {
    idp = await startScriptedIdp((t) => ({
      body: t === "good-token" ? { active: true, sub: OPERATOR, scope: "platform:read platform:write", exp: Math.floor(Date.now() / 1000) + 300 } : { active: false },
    }));
    const authenticator = createIntrospectionAuthenticator({ url: idp.url, cacheTtlSeconds: 60, timeoutMs: 2000, observer: metrics.observer });
    // No runtime: runs stay queued.
    server = await startServer({ authenticator, metrics, store: engine, outboundAllow: ["127.0.0.0/8"] });
    await server.seedTenant("globex", [{ subject: OPERATOR, role: "admin" }]);
  });
  afterAll(async () => {
    await server.close();
    await idp.stop();
  });

  it("reports the queued runs and the oldest one's age per tenant slug, and tenant-labelled webhook counts", async () => {
    const api = (method: string, body: unknown) => call(server, method, body, "globex", "good-token");
    const skill = ((await api("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
    const agent = ((await api("CreateAgent", { agent: { name: "echo", skillIds: [skill], steps: [{ skillId: skill, tool: "echo", arguments: '{"text": "hi"}' }] } })).agent as Json).id as string;
    const empty = await scrape(server);
    expect(sampleValue(empty, "agentplane_runs_queued", { tenant: "globex" })).toBeUndefined();
    await api("RunAgent", { id: agent });
    await api("RunAgent", { id: agent });
    await sleep(1100);
    await api("CreateTrigger", { trigger: { agentId: agent, webhook: { eventTypePattern: "a.b" } } });
    const source = (await api("CreateWebhookSource", { webhookSource: { name: "s" } })).token as string;
    expect(await postEvent(server, source, { event_type: "a.b", payload: {} })).toBe(202);

    const text = await scrape(server);
    expect(sampleValue(text, "agentplane_runs_queued", { tenant: "globex" })).toBe(3);
    const age = sampleValue(text, "agentplane_runs_queued_oldest_age_seconds", { tenant: "globex" })!;
    expect(age).toBeGreaterThanOrEqual(1);
    expect(age).toBeLessThan(30);
    expect(sampleValue(text, "agentplane_webhook_events_total", { outcome: "accepted", tenant: "globex" })).toBe(1);
    expect(sampleValue(text, "agentplane_triggers_matched_total", { tenant: "globex" })).toBe(1);
    // No tenant id leaks into a label: slugs only.
    expect(text).not.toMatch(/tenant="ten_/);
    expect(duplicateFamilies(text)).toEqual([]);
  });

  it("counts introspection requests by outcome and cache hits", async () => {
    expect((await connectCall(server, "ListAgents", {}, bearer("bad-token", "globex"))).status).toBe(401);
    expect((await connectCall(server, "ListAgents", {}, bearer("bad-token", "globex"))).status).toBe(401);
    const text = await scrape(server);
    expect(sampleValue(text, "agentplane_introspection_requests_total", { outcome: "active" })).toBe(1);
    expect(sampleValue(text, "agentplane_introspection_requests_total", { outcome: "inactive" })).toBe(1);
    expect(sampleValue(text, "agentplane_introspection_requests_total", { outcome: "error" })).toBe(0);
    expect(sampleValue(text, "agentplane_token_cache_lookups_total", { result: "miss" })).toBe(2);
    expect(sampleValue(text, "agentplane_token_cache_lookups_total", { result: "hit" })).toBeGreaterThanOrEqual(6);
  });
});
