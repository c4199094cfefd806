// SendWebhookSourceTestEvent (the console's "send test event") through the
// real server over Connect, the REST mirror and the platform MCP endpoint:
// the event goes in exactly as the source's webhook would bring it.
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { DEFAULT_QUOTAS } from "../src/service/limits.js";
import { bearer, connectCall, type TestServer, type TestServerOptions } from "./support/server.js";
import { platformMcpClient, startTwoTenantIdp, type TwoTenantIdp } from "./support/two-tenant-idp.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

type Json = Record<string, unknown>;

let idps: TwoTenantIdp;
let token: Record<string, string>;

beforeAll(async () => {
  idps = await startTwoTenantIdp();
  token = idps.token;
});
afterAll(() => idps?.idp.stop());

const start = (options: Partial<TestServerOptions> = {}): Promise<TestServer> => idps.start(options);

async function call(server: TestServer, method: string, body: unknown, as = "admin", tenant = "acme") {
  return connectCall(server, method, body, bearer(token[as]!, tenant));
}

async function ok(server: TestServer, method: string, body: unknown, as = "admin", tenant = "acme"): Promise<Json> {
  const res = await call(server, method, body, as, tenant);
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

// A source with a trigger on `order.*` for one agent. Names are unique in a
// tenant: each call's records get their own.
let setups = 0;
async function setup(server: TestServer, tenant = "acme", as = "admin") {
  const n = ++setups;
  const created = await ok(server, "CreateWebhookSource", { webhookSource: { name: `shop ${n}` } }, as, tenant);
  const source = created.webhookSource as Json;
  const agent = (await ok(server, "CreateAgent", { agent: { name: `fulfil ${n}`, model: PLACEHOLDER_MODEL } }, as, tenant)).agent as Json;
  const trigger = (await ok(server, "CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*", sourceId: source.id } } }, as, tenant))
    .trigger as Json;
  return { sourceId: source.id as string, sourceToken: created.token as string, agentId: agent.id as string, triggerId: trigger.id as string };
}

const ORDER = { eventType: "order.created", payload: { total: 250, id: "o-1" } };

async function post(server: TestServer, sourceToken: string) {
  return fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": sourceToken },
    body: JSON.stringify({ event_type: "order.created", payload: {} }),
  });
}

describe("send test event", () => {
  let server: TestServer;
  let acme: Awaited<ReturnType<typeof setup>>;

  beforeAll(async () => {
    server = await start({ jsonMaxDepth: 8 });
    acme = await setup(server);
  });
  afterAll(() => server?.close());

  const events = async (tenant = "acme", as = "admin") => ((await ok(server, "ListEvents", { sourceId: tenant === "acme" ? acme.sourceId : undefined }, as, tenant)).events as Json[] | undefined) ?? [];

  it("stores the event with its runs, and answers the stored event and the triggers it matched", async () => {
    const res = await ok(server, "SendWebhookSourceTestEvent", { id: acme.sourceId, ...ORDER });
    expect(res).toEqual({
      event: {
        id: expect.stringMatching(/^evt_/),
        tenant: "acme",
        sourceId: acme.sourceId,
        eventType: "order.created",
        payload: ORDER.payload,
        receiveTime: expect.any(String),
        matchedTriggerIds: [acme.triggerId],
        runIds: [expect.stringMatching(/^run_/)],
        createTime: expect.any(String),
        updateTime: expect.any(String),
      },
      matchedTriggers: 1,
    });
    const event = res.event as Json;
    expect((await events()).map((e) => e.id)).toContain(event.id);
    const runs = (await ok(server, "ListRuns", { eventId: event.id })).runs as Json[];
    expect(runs).toEqual([expect.objectContaining({ id: (event.runIds as string[])[0], agentId: acme.agentId, triggerId: acme.triggerId, eventId: event.id, status: "RUN_STATUS_QUEUED" })]);
    expect(await ok(server, "GetEvent", { id: event.id })).toEqual({ event });
  });

  it("answers the same over REST, and a type no trigger matches stores the event with no runs", async () => {
    const res = await fetch(`${server.url}/api/v1/webhook-sources/${acme.sourceId}/send-test-event`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(token.admin!, "acme") },
      body: JSON.stringify({ event_type: "invoice.paid", payload: { n: 1 } }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(body).toEqual({ event: expect.objectContaining({ eventType: "invoice.paid", payload: { n: 1 }, sourceId: acme.sourceId }) });
    const event = body.event as Json;
    // REST answers empty lists as [] (Connect's proto JSON leaves them out).
    expect(event.matchedTriggerIds).toEqual([]);
    expect(event.runIds).toEqual([]);
    expect((await events()).map((e) => e.id)).toContain(event.id);
  });

  it("refuses a viewer with permission_denied and stores nothing", async () => {
    const before = (await events()).length;
    const res = await call(server, "SendWebhookSourceTestEvent", { id: acme.sourceId, ...ORDER }, "viewer");
    expect(res).toMatchObject({
      status: 403,
      body: { code: "permission_denied", message: 'SendWebhookSourceTestEvent needs the admin role in tenant "acme"' },
    });
    expect((await events()).length).toBe(before);
  });

  it("names the invalid field, as the webhook does, and stores nothing", async () => {
    const before = (await events()).length;
    let deep: Json = { leaf: 1 };
    for (let i = 0; i < 10; i++) deep = { deep };
    const cases: [Json, RegExp][] = [
      [{ eventType: "has space", payload: {} }, /^event_type: /],
      [{ eventType: "order..created", payload: {} }, /^event_type: /],
      [{ payload: {} }, /^event_type: /],
      [{ eventType: "order.created" }, /^payload: is required and must be a JSON object$/],
      [{ eventType: "order.created", payload: deep }, /^payload: must not nest deeper than 8 levels$/],
    ];
    for (const [body, message] of cases) {
      const res = await call(server, "SendWebhookSourceTestEvent", { id: acme.sourceId, ...body });
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: "invalid_argument" });
      expect(res.body.message).toMatch(message);
    }
    expect((await events()).length).toBe(before);
  });

  it("refuses a disabled source with failed_precondition, and sends again once it is enabled", async () => {
    const { sourceId } = await setup(server);
    await ok(server, "UpdateWebhookSource", { webhookSource: { id: sourceId, enabled: false }, updateMask: "enabled" });
    const res = await call(server, "SendWebhookSourceTestEvent", { id: sourceId, ...ORDER });
    expect(res).toMatchObject({ status: 400, body: { code: "failed_precondition", message: expect.stringContaining("disabled") } });
    await ok(server, "UpdateWebhookSource", { webhookSource: { id: sourceId, enabled: true }, updateMask: "enabled" });
    expect((await ok(server, "SendWebhookSourceTestEvent", { id: sourceId, ...ORDER })).matchedTriggers).toBe(1);
  });

  it("answers not_found for another tenant's source and an unknown one, storing nothing in either tenant", async () => {
    const globex = await setup(server, "globex", "globex");
    const theirs = await call(server, "SendWebhookSourceTestEvent", { id: globex.sourceId, ...ORDER });
    const unknown = await call(server, "SendWebhookSourceTestEvent", { id: "src_0190aaaa-0000-7000-8000-000000000000", ...ORDER });
    expect(theirs).toMatchObject({ status: 404, body: { code: "not_found" } });
    expect(unknown).toMatchObject({ status: 404, body: { code: "not_found" } });
    expect(await events("globex", "globex")).toEqual([]);
  });

  it("is a tool on the platform MCP endpoint for an admin, not for a viewer", async () => {
    const connect = (t: string) => platformMcpClient(server, t);
    const viewer = await connect(token.viewerMcp!);
    expect((await viewer.listTools()).tools.map((t) => t.name)).not.toContain("send_webhook_source_test_event");
    await viewer.close();

    const admin = await connect(token.adminMcp!);
    const tool = (await admin.listTools()).tools.find((t) => t.name === "send_webhook_source_test_event");
    expect(tool).toMatchObject({ inputSchema: { required: ["id"] }, annotations: { readOnlyHint: false } });
    const result = (await admin.callTool({ name: "send_webhook_source_test_event", arguments: { id: acme.sourceId, ...ORDER } })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ event: { eventType: "order.created", sourceId: acme.sourceId }, matchedTriggers: 1 });
    await admin.close();
  });
});

describe("send test event limits", () => {
  it("takes the source's rate limit, one bucket with its webhooks", async () => {
    const server = await start({ webhook: { maxBytes: 4096, ratePerSecond: 0.01, burst: 2 } });
    try {
      const { sourceId, sourceToken } = await setup(server);
      expect((await call(server, "SendWebhookSourceTestEvent", { id: sourceId, ...ORDER })).status).toBe(200);
      expect((await post(server, sourceToken)).status).toBe(202);
      const limited = await call(server, "SendWebhookSourceTestEvent", { id: sourceId, ...ORDER });
      expect(limited).toMatchObject({ status: 429, body: { code: "resource_exhausted", message: "rate limit exceeded for this webhook source" } });
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      // The REST mirror's 429 says when to come back too.
      const viaRest = await fetch(`${server.url}/api/v1/webhook-sources/${sourceId}/send-test-event`, {
        method: "POST",
        headers: { "content-type": "application/json", ...bearer(token.admin!, "acme") },
        body: JSON.stringify(ORDER),
      });
      expect({ status: viaRest.status, body: await viaRest.json() }).toEqual({
        status: 429,
        body: { code: "resource_exhausted", message: "rate limit exceeded for this webhook source" },
      });
      expect(Number(viaRest.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect((await post(server, sourceToken)).status).toBe(429);
      expect((await ok(server, "ListEvents", {})).events).toHaveLength(2);
    } finally {
      await server.close();
    }
  });

  it("refuses an event whose runs would pass the queued-runs quota, storing nothing", async () => {
    const server = await start({ quotas: { ...DEFAULT_QUOTAS, queuedRuns: 1 } });
    try {
      const { sourceId } = await setup(server);
      expect((await ok(server, "SendWebhookSourceTestEvent", { id: sourceId, ...ORDER })).matchedTriggers).toBe(1);
      const refused = await call(server, "SendWebhookSourceTestEvent", { id: sourceId, ...ORDER });
      expect(refused).toMatchObject({ status: 429, body: { code: "resource_exhausted", message: expect.stringContaining("AGENTPLANE_QUOTA_QUEUED_RUNS") } });
      expect((await ok(server, "ListEvents", {})).events).toHaveLength(1);
    } finally {
      await server.close();
    }
  });
});
