// What one tenant may send and keep (issue 9): JSON nesting, keys that are
// special in JavaScript, what a non-member platform admin is offered on /mcp,
// the last admin of a tenant, string lengths and list sizes, and per-tenant
// quotas — each as a caller sees it, with the rows the store kept.
import { Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import pino from "pino";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { Scheduler } from "../src/runtime/scheduler.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, sqliteRows, startServer, type TestServer, type TestServerOptions } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let admin: string;

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
});

async function server(options: Partial<TestServerOptions> = {}): Promise<TestServer> {
  const s = await startServer({ authenticator: issuer.authenticator(60), webhook: { maxBytes: 1 << 20, ratePerSecond: 1000, burst: 1000 }, ...options });
  await s.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  return s;
}

async function call(s: TestServer, method: string, body: unknown, tenant = "acme") {
  return connectCall(s, method, body, bearer(admin, tenant));
}

async function ok(s: TestServer, method: string, body: unknown, tenant = "acme"): Promise<Json> {
  const res = await call(s, method, body, tenant);
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

// A request body sent as written: JSON.stringify would drop or recurse.
async function rawCall(s: TestServer, method: string, body: string) {
  const res = await fetch(`${s.url}/platform.v1.PlatformService/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...bearer(admin, "acme") },
    body,
  });
  return { status: res.status, text: await res.text() };
}

async function post(s: TestServer, token: string, body: string) {
  const res = await fetch(`${s.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token },
    body,
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as Json, headers: res.headers };
}

const count = (s: TestServer, table: string) => sqliteRows<{ n: number }>(s, `select count(*) as n from ${table}`)[0]!.n;

// Names are unique in a tenant: each record the helpers make gets its own.
let named = 0;
async function newSource(s: TestServer): Promise<string> {
  return (await ok(s, "CreateWebhookSource", { webhookSource: { name: `shop-${++named}` } })).token as string;
}

async function newAgent(s: TestServer, name = `worker-${++named}`): Promise<string> {
  return ((await ok(s, "CreateAgent", { agent: { name, model: PLACEHOLDER_MODEL } })).agent as Json).id as string;
}

const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

describe("a. JSON nesting", () => {
  let s: TestServer;
  beforeAll(async () => (s = await server()));
  afterAll(() => s.close());

  it("refuses a webhook payload nested 5,000 levels with 400 naming the limit, storing nothing", async () => {
    const token = await newSource(s);
    const res = await post(s, token, `{"event_type": "deep.one", "payload": {"x": ${nested(5000)}}}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: "invalid_argument", message: "payload: must not nest deeper than 64 levels" });
    // At the limit: accepted. The payload object is level 1, so 63 more.
    const atLimit = await post(s, token, `{"event_type": "deep.two", "payload": {"x": ${nested(63)}}}`);
    expect(atLimit.status).toBe(202);
    expect(sqliteRows(s, "select event_type from events")).toEqual([{ event_type: "deep.two" }]);
  });

  it("refuses a deeply nested RunAgent input with invalid_argument and queues nothing", async () => {
    const agentId = await newAgent(s);
    const res = await rawCall(s, "RunAgent", `{"id": "${agentId}", "input": {"x": ${nested(5000)}}}`);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toMatchObject({ code: "invalid_argument" });
    expect(sqliteRows(s, "select id from runs where agent_id = ?", agentId)).toEqual([]);
  });

  it("takes the depth from its option (AGENTPLANE_WEBHOOK_MAX_DEPTH), for payloads and run inputs alike", async () => {
    const small = await server({ jsonMaxDepth: 4 });
    try {
      const token = await newSource(small);
      const res = await post(small, token, `{"event_type": "a.b", "payload": {"x": ${nested(4)}}}`);
      expect(res.body).toEqual({ error: "invalid_argument", message: "payload: must not nest deeper than 4 levels" });
      expect((await post(small, token, `{"event_type": "a.b", "payload": {"x": ${nested(3)}}}`)).status).toBe(202);
      const agentId = await newAgent(small);
      const run = await rawCall(small, "RunAgent", `{"id": "${agentId}", "input": ${nested(5)}}`);
      expect({ status: run.status, body: JSON.parse(run.text) }).toEqual({
        status: 400,
        body: { code: "invalid_argument", message: "input: must not nest deeper than 4 levels" },
      });
      expect(count(small, "runs")).toBe(0);
    } finally {
      await small.close();
    }
  });
});

describe("b. keys that are special in JavaScript", () => {
  let s: TestServer;
  beforeAll(async () => (s = await server()));
  afterAll(() => s.close());

  const PAYLOAD = '{"__proto__": {"x": 1}, "constructor": {"prototype": {"polluted": true}}, "prototype": 3, "a": 1}';
  const own = (o: unknown, key: string) => Object.getOwnPropertyDescriptor(o, key)?.value as unknown;

  function expectRoundTrip(payload: unknown) {
    expect(Object.keys(payload as object).sort()).toEqual(["__proto__", "a", "constructor", "prototype"]);
    expect(own(payload, "__proto__")).toEqual({ x: 1 });
    expect(own(own(payload, "constructor"), "prototype")).toEqual({ polluted: true });
    expect(own(payload, "prototype")).toBe(3);
  }

  it("stores every key of a payload and reads each back through Connect, REST and filters, polluting nothing", async () => {
    const token = await newSource(s);
    const agentId = await newAgent(s);
    for (const filter of ["payload.__proto__.x = 1", "payload.constructor.prototype.polluted = true"])
      await ok(s, "CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: "proto.*", filter } } });

    const res = await post(s, token, `{"event_type": "proto.test", "payload": ${PAYLOAD}}`);
    expect(res.body).toMatchObject({ matched_triggers: 2 });
    const id = res.body.event_id as string;
    expectRoundTrip(JSON.parse(sqliteRows<{ payload: string }>(s, "select payload from events where id = ?", id)[0]!.payload));

    const got = await rawCall(s, "GetEvent", JSON.stringify({ id }));
    expectRoundTrip((JSON.parse(got.text) as { event: Json }).event.payload);
    const listed = await rawCall(s, "ListEvents", "{}");
    expectRoundTrip((JSON.parse(listed.text) as { events: Json[] }).events.find((e) => e.id === id)!.payload);
    const rest = await fetch(`${s.url}/api/v1/events/${id}`, { headers: bearer(admin, "acme") });
    expectRoundTrip((JSON.parse(await rest.text()) as { event: Json }).event.payload);

    expect(({} as Json).x).toBeUndefined();
    expect(({} as Json).polluted).toBeUndefined();
  });

  it("keeps the same keys in a run input (google.protobuf.Value) both ways", async () => {
    const agentId = await newAgent(s);
    const run = await rawCall(s, "RunAgent", `{"id": "${agentId}", "input": ${PAYLOAD}}`);
    expect(run.status).toBe(200);
    const runId = (JSON.parse(run.text) as { run: Json }).run.id as string;
    const got = await rawCall(s, "GetRun", JSON.stringify({ id: runId }));
    expectRoundTrip((JSON.parse(got.text) as { run: Json }).run.input);
    expect(({} as Json).x).toBeUndefined();
  });
});

describe("c. /mcp tools for a platform admin that is not a member", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await server();
    await s.seedTenant("initech", [{ subject: "someone-else", role: "admin" }]);
  });
  afterAll(() => s.close());

  async function mcp(tenant: string, scope: string) {
    const url = new URL(`${s.url}/mcp`);
    url.searchParams.set("tenant", tenant);
    const client = new Client({ name: "test", version: "1.0.0" });
    const headers = { authorization: `Bearer ${await devToken(issuer, scope)}` };
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
    return client;
  }

  it("lists exactly the tools it can call: tenant administration and member management", async () => {
    const client = await mcp("initech", "platform:admin mcp:platform.read mcp:platform.write");
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(names).toEqual(
      ["add_member", "create_tenant", "get_tenant", "list_members", "list_memberships", "list_tenants", "remove_member", "update_member", "update_tenant"].sort(),
    );
    // Each listed tool is callable (arguments aside); an unlisted one fails.
    const listMembers = (await client.callTool({ name: "list_members", arguments: {} })) as CallToolResult;
    expect(listMembers.isError).toBeFalsy();
    const listTenants = (await client.callTool({ name: "list_tenants", arguments: {} })) as CallToolResult;
    expect(listTenants.isError).toBeFalsy();
    const added = (await client.callTool({ name: "add_member", arguments: { member: { subject: "new-viewer", role: "ROLE_VIEWER" } } })) as CallToolResult;
    expect(added.isError).toBeFalsy();
    const agents = (await client.callTool({ name: "list_agents", arguments: {} })) as CallToolResult;
    expect((agents.content[0] as { text: string }).text).toBe('permission_denied: not a member of tenant "initech"');
    await client.close();
    expect(sqliteRows(s, "select subject, role from members where subject = 'new-viewer'")).toEqual([{ subject: "new-viewer", role: "viewer" }]);
  });

  it("still offers a member platform admin its tenant's tools", async () => {
    const client = await mcp("acme", "platform:admin mcp:platform.read mcp:platform.write");
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(["create_agent", "list_agents", "add_member", "list_tenants"]));
    await client.close();
  });
});

describe("d. the last admin of a tenant", () => {
  let s: TestServer;
  beforeAll(async () => (s = await server()));
  afterAll(() => s.close());

  const memberId = (subject: string, tenant = "acme") =>
    sqliteRows<{ id: string }>(s, "select m.id from members m join tenants t on t.id = m.tenant_id where t.slug = ? and m.subject = ?", tenant, subject)[0]!.id;

  it("refuses removing or demoting the only admin with failed_precondition, and allows it once another admin exists", async () => {
    const id = memberId(issuer.clientId);
    const demote = await call(s, "UpdateMember", { member: { id, role: "ROLE_VIEWER" }, updateMask: "role" });
    expect({ status: demote.status, code: demote.body.code }).toEqual({ status: 400, code: "failed_precondition" });
    expect(demote.body.message).toBe(`member "${id}" is the last admin of tenant "acme"; add another admin before demoting it`);
    const remove = await call(s, "RemoveMember", { id });
    expect(remove.body).toEqual({ code: "failed_precondition", message: `member "${id}" is the last admin of tenant "acme"; add another admin before removing it` });
    expect(sqliteRows(s, "select role from members where id = ?", id)).toEqual([{ role: "admin" }]);

    await ok(s, "AddMember", { member: { subject: "second-admin", role: "ROLE_ADMIN" } });
    const second = memberId("second-admin");
    expect((await call(s, "UpdateMember", { member: { id: second, role: "ROLE_VIEWER" }, updateMask: "role" })).status).toBe(200);
    expect((await call(s, "RemoveMember", { id: second })).status).toBe(200);
    expect(sqliteRows(s, "select subject, role from members where tenant_id = (select id from tenants where slug = 'acme')")).toEqual([
      { subject: issuer.clientId, role: "admin" },
    ]);
  });

  it("keeps one admin when two admins are removed at the same time", async () => {
    await s.seedTenant("race", [
      { subject: "admin-a", role: "admin" },
      { subject: "admin-b", role: "admin" },
    ]);
    // The dev client acts through the platform:admin bypass, not as a member.
    const results = await Promise.all(
      ["admin-a", "admin-b"].map((subject) => call(s, "RemoveMember", { id: memberId(subject, "race") }, "race")),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
    expect(results.find((r) => r.status === 400)!.body.code).toBe("failed_precondition");
    expect(sqliteRows(s, "select role from members where tenant_id = (select id from tenants where slug = 'race')")).toEqual([{ role: "admin" }]);
  });
});

describe("e. lengths and counts of what a tenant sends", () => {
  let s: TestServer;
  let agentId: string;
  beforeAll(async () => {
    s = await server();
    agentId = await newAgent(s);
  });
  afterAll(() => s.close());

  const long = (n: number) => "x".repeat(n);
  const cases: [string, string, () => unknown, string][] = [
    ["agent name", "CreateAgent", () => ({ agent: { name: long(201) } }), "agent.name: must be at most 200 characters"],
    ["agent description", "CreateAgent", () => ({ agent: { name: "a", description: long(2001) } }), "agent.description: must be at most 2000 characters"],
    ["skill_ids count", "CreateAgent", () => ({ agent: { name: "a", skillIds: Array.from({ length: 65 }, (_, i) => `skl_${i}`) } }), "agent.skill_ids: must have at most 64 entries"],
    ["steps count", "CreateAgent", () => ({ agent: { name: "a", steps: Array.from({ length: 65 }, () => ({ skillId: "skl_x", tool: "t" })) } }), "agent.steps: must have at most 64 entries"],
    ["model name", "CreateAgent", () => ({ agent: { name: "a", model: { baseUrl: "https://api.example.com/v1", model: long(201) } } }), "agent.model.model: must be at most 200 characters"],
    ["model api key", "CreateAgent", () => ({ agent: { name: "a", model: { baseUrl: "https://api.example.com/v1", model: "m", apiKey: long(8193) } } }), "agent.model.api_key: must be at most 8192 characters"],
    ["model base url", "CreateAgent", () => ({ agent: { name: "a", model: { baseUrl: `https://api.example.com/${long(2048)}`, model: "m" } } }), "agent.model.base_url: must be at most 2048 characters"],
    ["event type pattern", "CreateTrigger", () => ({ trigger: { agentId, webhook: { eventTypePattern: long(201) } } }), "trigger.webhook.event_type_pattern: must be at most 200 characters"],
    ["filter", "CreateTrigger", () => ({ trigger: { agentId, webhook: { eventTypePattern: "a.b", filter: `"${long(4095)}"` } } }), "trigger.webhook.filter: must be at most 4096 characters"],
    ["cron", "CreateTrigger", () => ({ trigger: { agentId, schedule: { cron: `* * * * * ${long(200)}` } } }), "trigger.schedule.cron: must be at most 200 characters"],
    ["timezone", "CreateTrigger", () => ({ trigger: { agentId, schedule: { cron: "* * * * *", timezone: long(65) } } }), "trigger.schedule.timezone: must be at most 64 characters"],
    ["skill name", "CreateSkill", () => ({ skill: { name: long(201), mcpUrl: "https://mcp.example.com/mcp" } }), "skill.name: must be at most 200 characters"],
    ["mcp url", "CreateSkill", () => ({ skill: { name: "s", mcpUrl: `https://mcp.example.com/${long(2048)}/mcp` } }), "skill.mcp_url: must be at most 2048 characters"],
    ["static token", "CreateSkill", () => ({ skill: { name: "s", mcpUrl: "https://mcp.example.com/mcp", auth: { staticBearer: { token: long(8193) } } } }), "skill.auth.static_bearer.token: must be at most 8192 characters"],
    ["oauth scopes count", "CreateSkill", () => ({ skill: { name: "s", mcpUrl: "https://mcp.example.com/mcp", auth: { oauth: { issuer: "https://id.example.com", clientId: "c", clientSecret: "s", scopes: Array.from({ length: 33 }, (_, i) => `s${i}`) } } } }), "skill.auth.oauth.scopes: must have at most 32 entries"],
    ["oauth client id", "CreateSkill", () => ({ skill: { name: "s", mcpUrl: "https://mcp.example.com/mcp", auth: { oauth: { issuer: "https://id.example.com", clientId: long(256), clientSecret: "s" } } } }), "skill.auth.oauth.client_id: must be at most 255 characters"],
    ["oauth audience", "CreateSkill", () => ({ skill: { name: "s", mcpUrl: "https://mcp.example.com/mcp", auth: { oauth: { issuer: "https://id.example.com", clientId: "c", clientSecret: "s", audience: long(2049) } } } }), "skill.auth.oauth.audience: must be at most 2048 characters"],
    ["source name", "CreateWebhookSource", () => ({ webhookSource: { name: long(201) } }), "webhook_source.name: must be at most 200 characters"],
    ["member subject", "AddMember", () => ({ member: { subject: long(256), role: "ROLE_VIEWER" } }), "member.subject: must be at most 255 characters"],
  ];

  it.each(cases)("refuses a too long or too large %s with invalid_argument naming the field and the limit", async (_what, method, body, message) => {
    const before = ["agents", "triggers", "skills", "webhook_sources", "members"].map((t) => count(s, t));
    const res = await call(s, method, body());
    expect({ status: res.status, body: res.body }).toEqual({ status: 400, body: { code: "invalid_argument", message } });
    expect(["agents", "triggers", "skills", "webhook_sources", "members"].map((t) => count(s, t))).toEqual(before);
  });

  it("bounds step arguments at 16 KiB (after the skill reference is checked)", async () => {
    const skill = await ok(s, "CreateSkill", { skill: { name: "tools", mcpUrl: "http://127.0.0.1:9/mcp" } });
    const skillId = (skill.skill as Json).id as string;
    const res = await call(s, "CreateAgent", { agent: { name: "a", skillIds: [skillId], steps: [{ skillId, tool: "t", arguments: `"${long(16_383)}"` }] } });
    expect(res.body).toEqual({ code: "invalid_argument", message: "agent.steps[0].arguments: must be at most 16384 characters" });
  });

  it("bounds the Idempotency-Key of a webhook", async () => {
    const token = await newSource(s);
    const res = await fetch(`${s.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": token, "idempotency-key": long(256) },
      body: '{"event_type": "a.b", "payload": {}}',
    });
    expect({ status: res.status, body: await res.json() }).toEqual({
      status: 400,
      body: { error: "invalid_argument", message: "Idempotency-Key: must be 1 to 255 characters" },
    });
  });
});

describe("f. per-tenant quotas", () => {
  let s: TestServer;
  const quotas = { agents: 2, skills: 1, triggers: 2, webhookSources: 1, members: 2, queuedRuns: 3 };
  beforeAll(async () => (s = await server({ quotas })));
  afterAll(() => s.close());

  function expectExhausted(res: { status: number; body: Json }, message: string) {
    expect({ status: res.status, body: res.body }).toEqual({ status: 429, body: { code: "resource_exhausted", message } });
  }

  it("refuses creating past each resource cap with resource_exhausted naming the cap and its variable", async () => {
    const agentId = await newAgent(s, "one");
    await newAgent(s, "two");
    expectExhausted(await call(s, "CreateAgent", { agent: { name: "three", model: PLACEHOLDER_MODEL } }), "tenant acme has 2 agents, the limit (AGENTPLANE_QUOTA_AGENTS)");
    expect(count(s, "agents")).toBe(2);

    await ok(s, "CreateSkill", { skill: { name: "one", mcpUrl: "http://127.0.0.1:9/mcp" } });
    expectExhausted(await call(s, "CreateSkill", { skill: { name: "two", mcpUrl: "http://127.0.0.1:9/mcp" } }), "tenant acme has 1 skills, the limit (AGENTPLANE_QUOTA_SKILLS)");
    expect(count(s, "skills")).toBe(1);

    await newSource(s);
    expectExhausted(await call(s, "CreateWebhookSource", { webhookSource: { name: "two" } }), "tenant acme has 1 webhook sources, the limit (AGENTPLANE_QUOTA_WEBHOOK_SOURCES)");
    expect(count(s, "webhook_sources")).toBe(1);

    for (const pattern of ["a.*", "b.*"]) await ok(s, "CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: pattern } } });
    expectExhausted(await call(s, "CreateTrigger", { trigger: { agentId, manual: {} } }), "tenant acme has 2 triggers, the limit (AGENTPLANE_QUOTA_TRIGGERS)");
    expect(count(s, "triggers")).toBe(2);

    await ok(s, "AddMember", { member: { subject: "viewer-1", role: "ROLE_VIEWER" } });
    expectExhausted(await call(s, "AddMember", { member: { subject: "viewer-2", role: "ROLE_VIEWER" } }), "tenant acme has 2 members, the limit (AGENTPLANE_QUOTA_MEMBERS)");
    expect(count(s, "members")).toBe(2);
  });

  it("caps queued runs: RunAgent, webhooks (429, retried later) and schedule slots (skipped, logged)", async () => {
    const q = await server({ quotas });
    try {
      const agentId = await newAgent(q);
      const token = await newSource(q);
      await ok(q, "CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: "order.*" } } });
      const runIds: string[] = [];
      for (let i = 0; i < 3; i++) runIds.push(((await ok(q, "RunAgent", { id: agentId })).run as Json).id as string);
      expectExhausted(await call(q, "RunAgent", { id: agentId }), "tenant acme has 3 queued runs, the limit (AGENTPLANE_QUOTA_QUEUED_RUNS)");

      const refused = await post(q, token, '{"event_type": "order.created", "payload": {"n": 1}}');
      expect({ status: refused.status, body: refused.body, retryAfter: refused.headers.get("retry-after") }).toEqual({
        status: 429,
        body: { error: "resource_exhausted", message: "tenant acme has 3 queued runs, the limit (AGENTPLANE_QUOTA_QUEUED_RUNS)" },
        retryAfter: "1",
      });
      // An event that queues nothing is not held back.
      expect((await post(q, token, '{"event_type": "other.thing", "payload": {}}')).status).toBe(202);
      expect(sqliteRows(q, "select event_type from events")).toEqual([{ event_type: "other.thing" }]);

      // Room again: the webhook path sees it within a second (its count is cached that long).
      await ok(q, "CancelRun", { id: runIds[0] });
      await new Promise((r) => setTimeout(r, 1100));
      expect((await post(q, token, '{"event_type": "order.created", "payload": {"n": 2}}')).status).toBe(202);
      expect((await post(q, token, '{"event_type": "order.created", "payload": {"n": 3}}')).status).toBe(429);
      expect(sqliteRows(q, "select count(*) as n from runs where status = 'queued'")).toEqual([{ n: 3 }]);

      // A schedule slot while the tenant is at its cap: recorded as skipped, no run, a warning.
      const created = await ok(q, "CreateTrigger", { trigger: { agentId, schedule: { cron: "* * * * *", timezone: "UTC" } } });
      const triggerId = (created.trigger as Json).id as string;
      const lines: Json[] = [];
      const log = pino({ level: "warn" }, new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(JSON.parse(chunk.toString()) as Json), done()) }));
      const scheduler = new Scheduler({ store: q.store.schedules, log, maxQueuedRuns: quotas.queuedRuns });
      expect((await scheduler.tick(Date.now() + 120_000)).fired).toBe(0);
      expect(sqliteRows(q, "select run_id from schedule_slots where trigger_id = ?", triggerId)).toEqual([{ run_id: "" }]);
      expect(sqliteRows(q, "select id from runs where trigger_id = ?", triggerId)).toEqual([]);
      expect(lines).toEqual([expect.objectContaining({ level: 40, triggerId, msg: expect.stringContaining("AGENTPLANE_QUOTA_QUEUED_RUNS") })]);
    } finally {
      await q.close();
    }
  });
});
