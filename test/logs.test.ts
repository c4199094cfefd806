// The log an operator reads (issue 12): one access line per request, run
// lifecycle lines with the ids to follow a run, throttled filter warnings,
// and no credential anywhere. Real server, real agent runtime, a real MCP
// SDK server; the lines are what the app's logger wrote.
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { ConfigError, loadConfig } from "../src/config.js";
import { startStaticBearerMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { LogCapture } from "./support/log-capture.js";
import { bearer, connectCall, connectMust, startServer, type TestServer } from "./support/server.js";
import { sleep, waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;

const SKILL_TOKEN = "skill-static-token-7f3a9c";
const MODEL_KEY = "sk-model-key-5d2e8b";
const COOKIE = "session-cookie-91c4aa";
const QUERY_SECRET = "query-secret-0b7d1e";
// A trigger's filter warnings come once per window of the service's clock,
// which the test moves on (clockShift) rather than waiting for: a window of
// real time was passed by five loaded requests once.
const WARN_EVERY_MS = 60_000;
let clockShift = 0;

let issuer: DevIssuer;
let admin: string;
let log: LogCapture;
let server: TestServer;
let tenantId: string;
let mcp: CustomerMcp;
let webhookToken: string;
let okAgent: string;
let failAgent: string;
let okTrigger: string;

async function must(method: string, body: unknown): Promise<Json> {
  return connectMust(server, method, body, bearer(admin, "acme"));
}

async function send(eventType: string, headers: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": webhookToken, ...headers },
    body: JSON.stringify({ event_type: eventType, payload: { n: 1 } }),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  log = new LogCapture("debug");
  server = await startServer({
    authenticator: issuer.authenticator(60),
    logger: log.logger,
    outboundAllow: ["127.0.0.0/8"],
    runtime: { executor: "agents" },
    expressions: { warnEveryMs: WARN_EVERY_MS },
    now: () => Date.now() + clockShift,
    // A stream with nothing to say ends after a second (the stream line's test).
    streams: { idleMs: 1000 },
  });
  tenantId = await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  mcp = await startStaticBearerMcp(SKILL_TOKEN);
  const skill = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url, auth: { staticBearer: { token: SKILL_TOKEN } } } })).skill as Json).id as string;
  const agent = async (name: string, tool: string, args: string) =>
    ((await must("CreateAgent", { agent: { name, skillIds: [skill], steps: [{ skillId: skill, tool, arguments: args }] } })).agent as Json).id as string;
  okAgent = await agent("echoes", "echo", '{"text": "hello"}');
  failAgent = await agent("fails", "fail", "");
  const source = await must("CreateWebhookSource", { webhookSource: { name: "shop" } });
  webhookToken = source.token as string;
  const trigger = async (agentId: string, webhook: Json) => ((await must("CreateTrigger", { trigger: { agentId, webhook } })).trigger as Json).id as string;
  okTrigger = await trigger(okAgent, { eventTypePattern: "order.created" });
  await trigger(failAgent, { eventTypePattern: "order.failed" });
});

afterAll(async () => {
  await server?.close();
  await mcp?.close();
});

describe("run lifecycle lines", () => {
  it("follow a succeeded run from the webhook that queued it, with tenant, run, agent, trigger and event ids", async () => {
    const { status, body } = await send("order.created");
    expect(status).toBe(202);
    const event = body.event_id as string;
    const finished = await log.next("run finished", { event });
    const ids = { tenant: tenantId, run: finished.run, agent: okAgent, trigger: okTrigger, event };
    expect(finished).toMatchObject({ ...ids, tenantSlug: "acme", level: 30, status: "succeeded", attempts: 1, durationMs: expect.any(Number) });
    expect(finished).not.toHaveProperty("error");
    expect(log.find("run queued", { event })).toEqual([expect.objectContaining({ ...ids, level: 20, via: "webhook" })]);
    expect(log.find("run started", { event })).toEqual([
      expect.objectContaining({ ...ids, tenantSlug: "acme", level: 30, attempt: 1, worker: expect.stringMatching(/^worker-/) }),
    ]);
    expect(log.find("run step failed", { event })).toEqual([]);
    // The order an operator reads them in.
    const order = log.lines.filter((l) => l.event === event).map((l) => l.msg);
    expect(order).toEqual(["run queued", "run started", "run finished"]);
    expect((await must("GetRun", { id: finished.run })).run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED" });
  });

  it("say which step failed with its error kind, and the run's failure at warn with its error", async () => {
    const { body } = await send("order.failed");
    const event = body.event_id as string;
    const finished = await log.next("run finished", { event });
    expect(finished).toMatchObject({
      level: 40,
      tenant: tenantId,
      agent: failAgent,
      event,
      status: "failed",
      attempts: 1,
      kind: "tool_error",
      error: expect.stringContaining("it failed"),
      durationMs: expect.any(Number),
    });
    expect(log.find("run step failed", { event })).toEqual([
      expect.objectContaining({ level: 30, run: finished.run, step: 0, stepKind: "tool_call", tool: "fail", kind: "tool_error", error: expect.stringContaining("it failed") }),
    ]);
    expect(finished).not.toHaveProperty("stack");
    expect((await must("GetRun", { id: finished.run })).run).toMatchObject({ status: "RUN_STATUS_FAILED" });
  });

  it("log RunAgent's run as queued by run_agent, without trigger or event", async () => {
    const run = ((await must("RunAgent", { id: okAgent, input: { x: 1 } })).run as Json).id as string;
    const finished = await log.next("run finished", { run });
    expect(finished).toMatchObject({ status: "succeeded", agent: okAgent });
    expect(finished).not.toHaveProperty("trigger");
    expect(finished).not.toHaveProperty("event");
    expect(log.find("run queued", { run })).toEqual([expect.objectContaining({ via: "run_agent", tenant: tenantId, agent: okAgent })]);
  });
});

describe("the access log", () => {
  it("has one line per request: method, route pattern, path without the query, status, duration, request id and tenant", async () => {
    await must("ListAgents", {});
    const connect = await log.next("request", { path: "/platform.v1.PlatformService/ListAgents" });
    expect(connect).toMatchObject({
      level: 30,
      method: "POST",
      route: "/platform.v1.PlatformService/ListAgents",
      status: 200,
      durationMs: expect.any(Number),
      reqId: expect.any(String),
      tenant: tenantId,
      tenantSlug: "acme",
    });

    const rest = await fetch(`${server.url}/api/v1/agents/${okAgent}`, { headers: bearer(admin, "acme") });
    expect(rest.status).toBe(200);
    expect(await log.next("request", { path: `/api/v1/agents/${okAgent}` })).toMatchObject({ method: "GET", route: "/api/v1/agents/:id", status: 200, tenantSlug: "acme" });
    // The query string is left out: it may carry a token.
    await fetch(`${server.url}/api/v1/runs?page_size=1&token=${QUERY_SECRET}`, { headers: bearer(admin, "acme") });
    expect(await log.next("request", { path: "/api/v1/runs" })).toMatchObject({ route: "/api/v1/runs" });

    // A refused caller's line names no tenant.
    expect((await fetch(`${server.url}/api/v1/agents`, { headers: { "x-platform-tenant": "acme" } })).status).toBe(401);
    expect(await log.next("request", { path: "/api/v1/agents", status: 401 })).not.toHaveProperty("tenant");

    // Webhooks: the source's tenant (its slug once cached).
    await send("nothing.matches");
    await send("nothing.matches");
    const hooks = await waitFor("two webhook lines", 5_000, () => {
      const found = log.find("request", { route: "/webhooks/events", status: 202 });
      return found.length >= 2 ? found : undefined;
    });
    expect(hooks.at(-1)).toMatchObject({ method: "POST", path: "/webhooks/events", tenant: tenantId, tenantSlug: "acme" });
    expect((await send("x.y", { "x-webhook-token": "whk_not-a-real-token-at-all-000000" })).status).toBe(401);
    expect(await log.next("request", { route: "/webhooks/events", status: 401 })).not.toHaveProperty("tenant");

    // Unknown routes are logged too; probes only at debug.
    await fetch(`${server.url}/no/such/route?token=${QUERY_SECRET}`);
    expect(await log.next("request", { path: "/no/such/route" })).toMatchObject({ status: 404, route: "(no route)" });
    await fetch(`${server.url}/healthz`);
    expect(await log.next("request", { path: "/healthz" })).toMatchObject({ level: 20, status: 200 });
  });

  it("logs a stream once, at its end, with its whole duration", async () => {
    const response = fetch(`${server.url}/platform.v1.PlatformService/WatchRuns`, {
      method: "POST",
      headers: { "content-type": "application/connect+json", ...bearer(admin, "acme") },
      body: Buffer.concat([Buffer.from([0, 0, 0, 0, 2]), Buffer.from("{}")]),
    });
    await sleep(300);
    expect(log.find("request", { route: "/platform.v1.PlatformService/WatchRuns" })).toEqual([]);
    // It ends when idle (a second here).
    const res = await response;
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const line = await log.next("request", { route: "/platform.v1.PlatformService/WatchRuns" });
    expect(line).toMatchObject({ tenantSlug: "acme", status: 200 });
    expect(line.durationMs).toBeGreaterThanOrEqual(1000);
    expect(line).not.toHaveProperty("aborted");
  });

  it("is off with AGENTPLANE_ACCESS_LOG=off, and the variable takes only on or off", async () => {
    const key = Buffer.alloc(32).toString("base64");
    const env = { AGENTPLANE_AUTH_MODE: "jwt", AGENTPLANE_JWT_ISSUER: "https://issuer.test/", AGENTPLANE_JWT_AUDIENCE: "https://api.test", AGENTPLANE_SECRET_KEY: key };
    expect(loadConfig(env).accessLog).toBe(true);
    expect(loadConfig({ ...env, AGENTPLANE_ACCESS_LOG: "off" }).accessLog).toBe(false);
    expect(() => loadConfig({ ...env, AGENTPLANE_ACCESS_LOG: "no" })).toThrow(ConfigError);
    expect(() => loadConfig({ ...env, AGENTPLANE_ACCESS_LOG: "no" })).toThrow(/AGENTPLANE_ACCESS_LOG must be on or off/);

    const quiet = new LogCapture("debug");
    const off = await startServer({ authenticator: issuer.authenticator(60), logger: quiet.logger, accessLog: false });
    try {
      await off.seedTenant("calm", [{ subject: issuer.clientId, role: "admin" }]);
      expect((await connectCall(off, "ListAgents", {}, bearer(admin, "calm"))).status).toBe(200);
      expect((await fetch(`${off.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${off.url}/api/v1/agents`, { headers: bearer(admin, "calm") })).status).toBe(200);
      await sleep(100);
      expect(quiet.find("request")).toEqual([]);
    } finally {
      await off.close();
    }
  });
});

describe("trigger filter failures", () => {
  it("warn once per trigger per window without a stack, the next line counting those held back", async () => {
    const trigger = ((await must("CreateTrigger", { trigger: { agentId: okAgent, webhook: { eventTypePattern: "bad.filter", filter: '$error("filter broke")' } } })).trigger as Json).id as string;
    const other = ((await must("CreateTrigger", { trigger: { agentId: okAgent, webhook: { eventTypePattern: "bad.other", filter: '$error("other broke")' } } })).trigger as Json).id as string;
    for (let i = 0; i < 5; i++) expect((await send("bad.filter")).body).toMatchObject({ matched_triggers: 0 });
    await send("bad.other");
    const warned = () => log.find("trigger filter failed; the event does not match it", { trigger });
    expect(warned()).toEqual([
      expect.objectContaining({ level: 40, tenant: tenantId, trigger, agent: okAgent, reason: "error", error: expect.stringContaining("filter broke"), suppressed: 0 }),
    ]);
    // Another trigger has its own window.
    expect(log.find("trigger filter failed; the event does not match it", { trigger: other })).toHaveLength(1);
    clockShift += WARN_EVERY_MS;
    await send("bad.filter");
    expect(warned()).toHaveLength(2);
    expect(warned()[1]).toMatchObject({ suppressed: 4 });
    for (const line of warned()) {
      expect(line).not.toHaveProperty("stack");
      expect(JSON.stringify(line)).not.toMatch(/\n\s+at /);
    }
  });
});

describe("redaction", () => {
  it("keeps every credential a request or a record carries out of the log", async () => {
    // Requests that carry secrets in every place one could be.
    const headers = { ...bearer(admin, "acme"), cookie: `sid=${COOKIE}` };
    const listed = await fetch(`${server.url}/api/v1/agents?access_token=${QUERY_SECRET}`, { headers });
    await must("CreateAgent", { agent: { name: "modelled", model: { baseUrl: "https://models.test/v1", model: "m", apiKey: MODEL_KEY } } });
    await send("order.created", { cookie: `sid=${COOKIE}` });
    const mcpCall = await fetch(`${server.url}/mcp?tenant=acme&token=${QUERY_SECRET}`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(mcpCall.status).toBe(200);
    await log.next("request", { route: "/mcp" });
    // A run whose skill call carries the skill's token.
    const run = ((await must("RunAgent", { id: okAgent, input: {} })).run as Json).id as string;
    await log.next("run finished", { run });

    // What a careless error line would carry: headers, a skill's auth, an
    // upstream error with its request headers, an agent's key, at any depth.
    const err = Object.assign(new Error("upstream refused"), { request: { headers: { Authorization: `Bearer ${SKILL_TOKEN}` } } });
    server.app.server.log.error(
      {
        err,
        request: { headers: { authorization: `Bearer ${admin}`, "x-webhook-token": webhookToken, cookie: `sid=${COOKIE}` } },
        skill: { auth: { staticBearer: { token: SKILL_TOKEN }, oauth: { client_secret: "client-secret-3e9f", clientSecret: "client-secret-3e9f" } } },
        agent: { model: { apiKey: MODEL_KEY, api_key: MODEL_KEY } },
        tokens: [{ access_token: admin, refresh_token: "refresh-8a1c" }],
      },
      "careless line",
    );
    const careless = await log.next("careless line");
    expect(careless).toMatchObject({ request: { headers: { authorization: "[redacted]", "x-webhook-token": "[redacted]", cookie: "[redacted]" } } });
    expect(careless.err).toMatchObject({ message: "upstream refused", stack: expect.any(String), request: { headers: { Authorization: "[redacted]" } } });

    for (const secret of [admin, admin.split(".")[2]!, webhookToken, SKILL_TOKEN, MODEL_KEY, COOKIE, QUERY_SECRET, "client-secret-3e9f", "refresh-8a1c"])
      expect(log.raw).not.toContain(secret);
    // The requests above were logged (the assertion is not vacuous).
    expect(log.find("request", { route: "/api/v1/agents", status: listed.status }).length).toBeGreaterThan(0);
  });
});
