// The real HTTP server on PostgreSQL: what a sender and an API caller see
// (Connect and REST, webhooks, paging, readiness) and the rows the database
// then holds.
import postgres from "postgres";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

type Json = Record<string, unknown>;

describe("the HTTP server on PostgreSQL", () => {
  let issuer: DevIssuer;
  let token: string;
  let server: TestServer;
  let sql: postgres.Sql;
  let source: { id: string; token: string };
  let agentId: string;

  beforeAll(async () => {
    issuer = await devIssuer();
    token = await devToken(issuer);
    server = await startServer({ authenticator: issuer.authenticator(60), store: "postgres", webhook: { maxBytes: 4096, ratePerSecond: 10_000, burst: 10_000 } });
    await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    sql = postgres(server.databaseUrl!, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await sql?.end();
    await server?.close();
  });

  async function api(method: string, body: unknown): Promise<Json> {
    const res = await connectCall(server, method, body, bearer(token, "acme"));
    if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  async function rest(method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
    const res = await fetch(`${server.url}/api/v1${path}`, {
      method,
      headers: { ...bearer(token, "acme"), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
  }

  async function post(body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
    const res = await fetch(`${server.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": source.token, ...headers },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
  }

  const ORDER = { event_type: "order.created", payload: { total: 250, items: [{ sku: "a-1", qty: 2 }] } };

  it("creates an agent over REST, a webhook source and a trigger over Connect", async () => {
    const created = await rest("POST", "/agents", { agent: { name: "fulfil", model: PLACEHOLDER_MODEL } });
    expect(created.status).toBe(201);
    agentId = (created.body.agent as Json).id as string;
    const body = await api("CreateWebhookSource", { webhookSource: { name: "shop" } });
    source = { id: (body.webhookSource as Json).id as string, token: body.token as string };
    await api("CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: "order.*" } } });
    expect(await sql`select name, enabled from agents`).toEqual([{ name: "fulfil", enabled: true }]);
    expect(await sql`select kind, event_type_pattern, agent_id from triggers`).toEqual([{ kind: "webhook", event_type_pattern: "order.*", agent_id: agentId }]);
  });

  it("answers 202 with the event and its run stored, and 200 for the same key again", async () => {
    const res = await post(ORDER, { "idempotency-key": "order-1" });
    expect(res).toEqual({ status: 202, body: { event_id: expect.stringMatching(/^evt_/), matched_triggers: 1 } });
    const id = res.body.event_id as string;
    expect(await sql`select event_type, source_id, payload, idempotency_key from events where id = ${id}`).toEqual([
      { event_type: "order.created", source_id: source.id, payload: ORDER.payload, idempotency_key: "order-1" },
    ]);
    expect(await sql`select agent_id, status from runs where event_id = ${id}`).toEqual([{ agent_id: agentId, status: "queued" }]);

    const again = await post({ ...ORDER, payload: { total: 1 } }, { "idempotency-key": "order-1" });
    expect(again).toEqual({ status: 200, body: { event_id: id, duplicate: true } });
    expect(await sql`select count(*)::int as n from events where idempotency_key = 'order-1'`).toEqual([{ n: 1 }]);
    const event = (await api("GetEvent", { id })).event as Json;
    expect(event).toMatchObject({ id, eventType: "order.created", payload: ORDER.payload, runIds: [expect.stringMatching(/^run_/)] });
  });

  it("stores every event of a concurrent burst with its run, and one event per repeated key", async () => {
    const posts = await Promise.all(
      Array.from({ length: 60 }, (_, i) => post({ ...ORDER, payload: { n: i } }, { "idempotency-key": `burst-${i % 40}` })),
    );
    expect(posts.filter((p) => p.status === 202)).toHaveLength(40);
    expect(posts.filter((p) => p.status === 200)).toHaveLength(20);
    const ids = new Set(posts.map((p) => p.body.event_id as string));
    expect(ids.size).toBe(40);
    const [stored] = await sql<[{ events: number; runs: number }]>`
      select count(distinct e.id)::int as events, count(r.id)::int as runs
      from events e join runs r on r.event_id = e.id where e.idempotency_key like 'burst-%'`;
    expect(stored).toEqual({ events: 40, runs: 40 });
  });

  it("pages events and runs newest first", async () => {
    const all = ((await api("ListEvents", { pageSize: 100 })).events as Json[]).map((e) => e.id as string);
    expect(all).toHaveLength(41);
    expect(all).toEqual([...all].sort().reverse());
    const seen: string[] = [];
    let pageToken: string | undefined;
    do {
      const page = await api("ListEvents", { pageSize: 15, ...(pageToken && { pageToken }) });
      seen.push(...(page.events as Json[]).map((e) => e.id as string));
      pageToken = page.nextPageToken as string | undefined;
    } while (pageToken);
    expect(seen).toEqual(all);

    const first = await rest("GET", "/runs?page_size=30");
    const second = await rest("GET", `/runs?page_size=30&page_token=${first.body.nextPageToken as string}`);
    const runs = [...(first.body.runs as Json[]), ...(second.body.runs as Json[])];
    expect(runs).toHaveLength(41);
    expect(second.body.nextPageToken).toBeUndefined();
    expect(runs.every((r) => r.agentId === agentId && r.status === "RUN_STATUS_QUEUED")).toBe(true);
  });

  it("is not ready while the database refuses connections, and ready again after", async () => {
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    const name = new URL(server.databaseUrl!).pathname.slice(1);
    const adminUrl = new URL(server.databaseUrl!);
    adminUrl.pathname = "/postgres";
    const admin = postgres(adminUrl.toString(), { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`alter database ${name} allow_connections false`);
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name}`;
      const down = await fetch(`${server.url}/readyz`);
      expect(down.status).toBe(503);
      expect(await down.json()).toEqual({ status: "unavailable", message: "store unavailable" });
      expect((await post(ORDER)).status).toBe(503);
    } finally {
      await admin.unsafe(`alter database ${name} allow_connections true`);
      await admin.end();
    }
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    expect((await post(ORDER)).status).toBe(202);
    // It listens again: a change another replica makes reaches it.
    let heard = false;
    const off = server.store.signals.onChanged((table) => (heard ||= table === "agents"));
    try {
      for (let i = 0; !heard; i++) {
        if (i === 50) throw new Error("no change heard within 10 s of the database coming back");
        await sql`update agents set update_time = update_time`;
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      off();
    }
  });
});
