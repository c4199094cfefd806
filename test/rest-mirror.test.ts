// The REST mirror as a new user meets it with curl: empty lists are lists,
// an empty JSON body is no body, unknown paths answer in the API's error
// shape, enum filters take the short name, and listed events carry the runs
// they queued, on both store engines.
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, startServer, type TestServer } from "./support/server.js";

type Json = Record<string, unknown>;

// Never called: no runtime runs in these servers, runs stay queued.
const MODEL = { baseUrl: "https://model.example.com/v1", model: "m" };

describe.each(["sqlite", "postgres"] as const)("REST mirror (%s)", (engine) => {
  let issuer: DevIssuer;
  let server: TestServer;
  let token: string;

  beforeAll(async () => {
    issuer = await devIssuer();
    server = await startServer({ authenticator: issuer.authenticator(60), store: engine });
    await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    await server.seedTenant("empty", [{ subject: issuer.clientId, role: "admin" }]);
    token = await devToken(issuer);
  });
  afterAll(() => server.close());

  async function rest(method: string, path: string, init: { body?: string; headers?: Record<string, string>; tenant?: string } = {}) {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...bearer(token, init.tenant ?? "acme"), ...init.headers },
      body: init.body,
    });
    const text = await res.text();
    return { status: res.status, type: res.headers.get("content-type"), body: (text ? JSON.parse(text) : undefined) as Json };
  }
  const json = (value: unknown) => ({ body: JSON.stringify(value), headers: { "content-type": "application/json" } });

  it("answers empty lists as [] and keeps every repeated field of a resource", async () => {
    for (const path of ["agents", "skills", "triggers", "webhook-sources", "events", "runs"]) {
      const res = await rest("GET", `/api/v1/${path}`, { tenant: "empty" });
      expect(res.status).toBe(200);
      const field = path.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
      expect(res.body).toEqual({ [field]: [] });
    }
    const created = await rest("POST", "/api/v1/agents", { ...json({ agent: { name: "bare", model: MODEL } }), tenant: "empty" });
    expect(created.status).toBe(201);
    expect(created.body.agent).toMatchObject({ skillIds: [], steps: [], allowedTools: {} });
    const listed = await rest("GET", "/api/v1/agents", { tenant: "empty" });
    expect((listed.body.agents as Json[])[0]).toMatchObject({ skillIds: [], steps: [], allowedTools: {} });
    expect(listed.body.nextPageToken).toBeUndefined();
  });

  it("keeps Connect's JSON standard: empty repeated fields are left out there", async () => {
    const res = await fetch(`${server.url}/platform.v1.PlatformService/ListTriggers`, {
      method: "POST",
      headers: { ...bearer(token, "empty"), "content-type": "application/json" },
      body: "{}",
    });
    expect(await res.json()).toEqual({});
  });

  it("accepts a JSON content type with an empty body on POST and DELETE", async () => {
    const { agent } = (await rest("POST", "/api/v1/agents", json({ agent: { name: "to run", model: MODEL } }))).body as { agent: Json };
    const run = await rest("POST", `/api/v1/agents/${agent.id as string}/run`, { headers: { "content-type": "application/json" } });
    expect(run.status).toBe(200);
    expect(run.body.run).toMatchObject({ agentId: agent.id, status: "RUN_STATUS_QUEUED" });
    const deleted = await rest("DELETE", `/api/v1/agents/${agent.id as string}`, { headers: { "content-type": "application/json" } });
    expect(deleted).toMatchObject({ status: 200, body: {} });
    // Not JSON is still refused, and a body that is only whitespace is not empty.
    const bad = await rest("POST", "/api/v1/agents", { body: " ", headers: { "content-type": "application/json" } });
    expect(bad).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
  });

  it("answers unknown routes 404 in the Connect error shape", async () => {
    for (const [method, path] of [
      ["GET", "/api/v1/nope"],
      ["GET", "/api/v2/agents"],
      ["PUT", "/api/v1/agents"],
      ["POST", "/api/v1/agents/agt_x/explode"],
      ["GET", "/nothing-here"],
      ["POST", "/platform.v1.PlatformService/Explode"],
    ] as const) {
      const res = await rest(method, path, method === "GET" ? {} : json({}));
      expect({ method, path, status: res.status, type: res.type, body: res.body }).toEqual({
        method,
        path,
        status: 404,
        type: expect.stringMatching(/^application\/json/),
        body: { code: "not_found", message: `no route for ${method} ${path}` },
      });
    }
  });

  it("filters by an enum's short name, in any case, as well as its full name", async () => {
    const { agent } = (await rest("POST", "/api/v1/agents", json({ agent: { name: "filtered", model: MODEL } }))).body as { agent: Json };
    const run = (await rest("POST", `/api/v1/agents/${agent.id as string}/run`, json({}))).body.run as Json;
    for (const status of ["queued", "QUEUED", "Queued", "RUN_STATUS_QUEUED", "run_status_queued"]) {
      const res = await rest("GET", `/api/v1/runs?agent_id=${agent.id as string}&status=${status}`);
      expect({ status, ids: (res.body.runs as Json[]).map((r) => r.id) }).toEqual({ status, ids: [run.id] });
    }
    expect((await rest("GET", `/api/v1/runs?agent_id=${agent.id as string}&status=failed`)).body).toEqual({ runs: [] });
    const bad = await rest("GET", "/api/v1/runs?status=exploded");
    expect(bad).toMatchObject({ status: 400, body: { code: "invalid_argument", message: expect.stringContaining("status") } });
  });

  it("lists each event with the runs it queued, as GetEvent shows them", async () => {
    const { agent } = (await rest("POST", "/api/v1/agents", json({ agent: { name: "listed", model: MODEL } }))).body as { agent: Json };
    await rest("POST", "/api/v1/triggers", json({ trigger: { agentId: agent.id, webhook: { eventTypePattern: "list.*" } } }));
    await rest("POST", "/api/v1/triggers", json({ trigger: { agentId: agent.id, webhook: { eventTypePattern: "list.two" } } }));
    const { webhookSource } = (await rest("POST", "/api/v1/webhook-sources", json({ webhookSource: { name: "listing" } }))).body as { webhookSource: Json };
    const send = async (eventType: string) =>
      ((await rest("POST", `/api/v1/webhook-sources/${webhookSource.id as string}/send-test-event`, json({ eventType, payload: {} }))).body.event as Json).id as string;
    const one = await send("list.one");
    const two = await send("list.two");
    const none = await send("other.thing");
    await rest("POST", `/api/v1/events/${one}/replay`, json({}));
    const listed = (await rest("GET", `/api/v1/events?source_id=${webhookSource.id as string}`)).body.events as Json[];
    expect(listed.map((e) => e.id)).toEqual([none, two, one]);
    for (const event of listed) {
      const got = (await rest("GET", `/api/v1/events/${event.id as string}`)).body.event as Json;
      expect(event.runIds).toEqual(got.runIds);
    }
    expect(listed.map((e) => (e.runIds as string[]).length)).toEqual([0, 2, 2]);
  });
});
