// POST /webhooks/events as a webhook sender sees it: every row of the
// contract's table (SPEC §4), trigger matching, and tenant isolation.
import { request } from "node:http";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, sqliteRows, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let admin: string;

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
});

async function api(server: TestServer, method: string, body: unknown, tenant = "acme"): Promise<Json> {
  const res = await connectCall(server, method, body, bearer(admin, tenant));
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function newSource(server: TestServer, name: string, tenant = "acme"): Promise<{ id: string; token: string }> {
  const body = await api(server, "CreateWebhookSource", { webhookSource: { name } }, tenant);
  return { id: (body.webhookSource as Json).id as string, token: body.token as string };
}

async function post(
  server: TestServer,
  token: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Json; headers: Headers }> {
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token === undefined ? {} : { "x-webhook-token": token }), ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {}, headers: res.headers };
}

const ORDER = { event_type: "order.created", payload: { total: 250, id: "o-1" } };
// Valid JSON that is not an event: 400 when admitted, so a probe stores nothing.
const NOT_AN_EVENT = { event_type: "order.created", note: "x".repeat(800) };

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check()); await new Promise((r) => setTimeout(r, 20)))
    if (Date.now() > deadline) throw new Error("the condition did not hold in time");
}

// A webhook whose headers and first half of its body are sent; the rest on
// finish(), or the connection dropped on abort().
function heldPost(server: TestServer, token: string, body: string, chunked: boolean) {
  const req = request(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token, ...(chunked ? {} : { "content-length": Buffer.byteLength(body) }) },
  });
  const answered = new Promise<{ status: number; body: Json }>((resolve, reject) => {
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Json }));
    });
    req.on("error", reject);
  });
  let status = 0;
  answered.then((a) => (status = a.status)).catch(() => {});
  const half = Math.floor(body.length / 2);
  req.write(body.slice(0, half));
  return {
    // Answered before its body was complete: refused.
    refused: () => status !== 0,
    finish: () => {
      req.end(body.slice(half));
      return answered;
    },
    abort: () => {
      answered.catch(() => {}); // the hang-up is the point
      req.destroy();
    },
  };
}

describe("webhook ingestion", () => {
  let server: TestServer;
  let source: { id: string; token: string };
  let agentId: string;

  beforeAll(async () => {
    server = await startServer({ authenticator: issuer.authenticator(60), webhook: { maxBytes: 4096, ratePerSecond: 1000, burst: 1000 } });
    await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    source = await newSource(server, "shop");
    agentId = ((await api(server, "CreateAgent", { agent: { name: "fulfil", model: PLACEHOLDER_MODEL } })).agent as Json).id as string;
    await api(server, "CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: "order.*" } } });
  });
  afterAll(() => server.close());

  it("answers 202 only with the event and its runs committed", async () => {
    const res = await post(server, source.token, ORDER);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ event_id: expect.stringMatching(/^evt_/), matched_triggers: 1 });
    const id = res.body.event_id as string;
    expect(sqliteRows(server, "select event_type, source_id from events where id = ?", id)).toEqual([{ event_type: "order.created", source_id: source.id }]);
    expect(sqliteRows(server, "select agent_id, status from runs where event_id = ?", id)).toEqual([{ agent_id: agentId, status: "queued" }]);
    const event = (await api(server, "GetEvent", { id })).event as Json;
    expect(event).toMatchObject({ id, eventType: "order.created", payload: ORDER.payload, matchedTriggerIds: [expect.stringMatching(/^trg_/)], runIds: [expect.stringMatching(/^run_/)] });
  });

  it("answers a repeated Idempotency-Key or webhook-id from the same source with the first event", async () => {
    for (const header of ["idempotency-key", "webhook-id"]) {
      const key = `${header}-1`;
      const first = await post(server, source.token, ORDER, { [header]: key });
      expect(first.status).toBe(202);
      const again = await post(server, source.token, { ...ORDER, payload: { different: true } }, { [header]: key });
      expect(again).toMatchObject({ status: 200, body: { event_id: first.body.event_id, duplicate: true } });
      expect(sqliteRows(server, "select count(*) as n from events where idempotency_key = ?", key)).toEqual([{ n: 1 }]);
      expect(sqliteRows(server, "select count(*) as n from runs where event_id = ?", first.body.event_id)).toEqual([{ n: 1 }]);
    }
    const other = await newSource(server, "other-shop");
    const sameKeyElsewhere = await post(server, other.token, ORDER, { "idempotency-key": "idempotency-key-1" });
    expect(sameKeyElsewhere.status).toBe(202);
  });

  it("stores one event for 50 concurrent posts of one key", async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => post(server, source.token, { ...ORDER, payload: { n: i } }, { "idempotency-key": "burst-1" })),
    );
    const accepted = results.filter((r) => r.status === 202);
    expect(accepted).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(49);
    expect(new Set(results.map((r) => r.body.event_id))).toEqual(new Set([accepted[0]!.body.event_id]));
    expect(sqliteRows(server, "select count(*) as n from events where idempotency_key = 'burst-1'")).toEqual([{ n: 1 }]);
    expect(sqliteRows(server, "select count(*) as n from runs where event_id = ?", accepted[0]!.body.event_id)).toEqual([{ n: 1 }]);
  });

  it("gives one indistinguishable 401 for missing, malformed, unknown, revoked and disabled tokens", async () => {
    const disabled = await newSource(server, "disabled");
    await api(server, "UpdateWebhookSource", { webhookSource: { id: disabled.id, enabled: false }, updateMask: "enabled" });
    const revoked = await newSource(server, "revoked");
    await api(server, "RotateWebhookSourceToken", { id: revoked.id, gracePeriod: "0s" });
    const tokens = [undefined, "", "Bearer x", "whk_short", `whk_${"A".repeat(43)}`, revoked.token, disabled.token];
    const before = sqliteRows(server, "select count(*) as n from events")[0];
    for (const token of tokens) {
      const res = await post(server, token, ORDER);
      expect({ token, status: res.status, body: res.body }).toEqual({
        token,
        status: 401,
        body: { error: "unauthenticated", message: "invalid or missing webhook token" },
      });
    }
    expect(sqliteRows(server, "select count(*) as n from events")[0]).toEqual(before);
  });

  it("keeps the old token valid during the rotation grace period, not after", async () => {
    const rotating = await newSource(server, "rotating");
    const rotated = await api(server, "RotateWebhookSourceToken", { id: rotating.id, gracePeriod: "1s" });
    expect((await post(server, rotating.token, ORDER)).status).toBe(202);
    expect((await post(server, rotated.token as string, ORDER)).status).toBe(202);
    await new Promise((r) => setTimeout(r, 1100));
    expect((await post(server, rotating.token, ORDER)).status).toBe(401);
    expect((await post(server, rotated.token as string, ORDER)).status).toBe(202);
  });

  it("names the invalid field with 400", async () => {
    const cases: [unknown, string][] = [
      ["{not json", "body: is not valid JSON"],
      [[1, 2], "body: must be a JSON object"],
      [{ payload: {} }, "event_type: is required and must be a string"],
      [{ event_type: "has space", payload: {} }, "event_type"],
      [{ event_type: "order..created", payload: {} }, "event_type"],
      [{ event_type: "order.created" }, "payload: is required and must be a JSON object"],
      [{ event_type: "order.created", payload: [1] }, "payload"],
      [{ event_type: "order.created", payload: "x" }, "payload"],
    ];
    for (const [body, message] of cases) {
      const res = await post(server, source.token, body);
      expect({ body, status: res.status, error: res.body.error }).toEqual({ body, status: 400, error: "invalid_argument" });
      expect(res.body.message).toContain(message);
    }
  });

  it("answers a POST with no body and no Content-Type 400, as any body that is not an object", async () => {
    const res = await fetch(`${server.url}/webhooks/events`, { method: "POST", headers: { "x-webhook-token": source.token } });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "invalid_argument", message: expect.stringContaining("body: must be a JSON object") });
  });

  it("refuses a body that is not JSON by content type with 415", async () => {
    const res = await post(server, source.token, JSON.stringify(ORDER), { "content-type": "text/plain" });
    expect(res.status).toBe(415);
    expect(res.body.error).toBe("unsupported_media_type");
  });

  it("refuses an oversized body with 413, with or without Content-Length, storing nothing", async () => {
    const before = sqliteRows(server, "select count(*) as n from events")[0];
    const big = { event_type: "order.created", payload: { blob: "x".repeat(5000) } };
    expect((await post(server, source.token, big)).status).toBe(413);

    // Chunked, no Content-Length: refused while streaming, never truncated.
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${server.url}/webhooks/events`,
        { method: "POST", headers: { "content-type": "application/json", "x-webhook-token": source.token, "transfer-encoding": "chunked" } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      const body = JSON.stringify(big);
      for (let i = 0; i < body.length; i += 512) req.write(body.slice(i, i + 512));
      req.end();
    });
    expect(status).toBe(413);
    expect(sqliteRows(server, "select count(*) as n from events")[0]).toEqual(before);
  });

  describe("matching", () => {
    let matchAgent: string;
    let sourceA: { id: string; token: string };
    let sourceB: { id: string; token: string };
    const triggers: Record<string, string> = {};

    beforeAll(async () => {
      await server.seedTenant("matching", [{ subject: issuer.clientId, role: "admin" }]);
      matchAgent = ((await api(server, "CreateAgent", { agent: { name: "m", model: PLACEHOLDER_MODEL } }, "matching")).agent as Json).id as string;
      sourceA = await newSource(server, "a", "matching");
      sourceB = await newSource(server, "b", "matching");
      const create = async (name: string, webhook: Json, enabled = true) => {
        const body = await api(server, "CreateTrigger", { trigger: { agentId: matchAgent, enabled, webhook } }, "matching");
        triggers[name] = (body.trigger as Json).id as string;
      };
      await create("exact", { eventTypePattern: "order.created" });
      await create("oneSegment", { eventTypePattern: "order.*" });
      await create("rest", { eventTypePattern: "github.**" });
      await create("filtered", { eventTypePattern: "order.created", filter: "payload.total > 100" });
      await create("onlyB", { eventTypePattern: "order.created", sourceId: sourceB.id });
      await create("disabled", { eventTypePattern: "order.created" }, false);
    });

    const matched = async (token: string, event_type: string, payload: Json = {}) => {
      const res = await post(server, token, { event_type, payload });
      expect(res.status).toBe(202);
      const event = (await api(server, "GetEvent", { id: res.body.event_id }, "matching")).event as Json;
      const names = Object.entries(triggers)
        .filter(([, id]) => ((event.matchedTriggerIds as string[] | undefined) ?? []).includes(id))
        .map(([name]) => name)
        .sort();
      expect(res.body.matched_triggers).toBe(names.length);
      return names;
    };

    it("matches exact, one-segment and rest patterns", async () => {
      expect(await matched(sourceA.token, "order.created")).toEqual(["exact", "oneSegment"]);
      expect(await matched(sourceA.token, "order.created.v2")).toEqual([]);
      expect(await matched(sourceA.token, "order.shipped")).toEqual(["oneSegment"]);
      expect(await matched(sourceA.token, "github.push")).toEqual(["rest"]);
      expect(await matched(sourceA.token, "github.pull_request.opened")).toEqual(["rest"]);
      expect(await matched(sourceA.token, "github")).toEqual([]);
    });

    it("applies the JSONata filter and the source restriction; a disabled trigger never matches", async () => {
      expect(await matched(sourceA.token, "order.created", { total: 101 })).toEqual(["exact", "filtered", "oneSegment"]);
      expect(await matched(sourceA.token, "order.created", { total: 99 })).toEqual(["exact", "oneSegment"]);
      expect(await matched(sourceB.token, "order.created", { total: 5 })).toEqual(["exact", "oneSegment", "onlyB"]);
    });

    it("keeps events and runs of one tenant out of another", async () => {
      const res = await post(server, sourceA.token, { event_type: "order.created", payload: {} });
      const id = res.body.event_id as string;
      const listed = await api(server, "ListEvents", {}, "acme");
      expect(((listed.events as Json[] | undefined) ?? []).map((e) => e.id)).not.toContain(id);
      const cross = await connectCall(server, "GetEvent", { id }, bearer(admin, "acme"));
      expect(cross).toMatchObject({ status: 404, body: { code: "not_found" } });
      const runs = await api(server, "ListRuns", { eventId: id }, "acme");
      expect(runs.runs).toBeUndefined();
      const own = await api(server, "ListRuns", { eventId: id }, "matching");
      expect((own.runs as Json[]).length).toBe(2);
    });
  });
});

describe("webhook limits and failures", () => {
  it("answers 429 with Retry-After past the source's burst", async () => {
    // The service's clock stands still: on a loaded machine a second between
    // two posts would refill a token at 1/s, and the burst is what is tested.
    const frozen = Date.now();
    const server = await startServer({ authenticator: issuer.authenticator(60), webhook: { maxBytes: 4096, ratePerSecond: 1, burst: 2 }, now: () => frozen });
    try {
      await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
      const { token } = await newSource(server, "s");
      expect((await post(server, token, ORDER)).status).toBe(202);
      expect((await post(server, token, ORDER)).status).toBe(202);
      const limited = await post(server, token, ORDER);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(limited.body.error).toBe("resource_exhausted");
    } finally {
      await server.close();
    }
  });

  it("answers 429 with Retry-After while a tenant's bodies in flight would pass its byte limit, storing nothing for them", async () => {
    const server = await startServer({
      authenticator: issuer.authenticator(60),
      webhook: { maxBytes: 4096, ratePerSecond: 1000, burst: 1000, tenantInflightBytes: 3000 },
    });
    try {
      await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
      await server.seedTenant("other", [{ subject: issuer.clientId, role: "admin" }]);
      const shop = await newSource(server, "shop");
      const billing = await newSource(server, "billing");
      const foreign = await newSource(server, "shop", "other");
      // An event of exactly `bytes` bytes.
      const sized = (bytes: number, id: string) => {
        const base = JSON.stringify({ event_type: "order.created", payload: { id, pad: "" } });
        return JSON.stringify({ event_type: "order.created", payload: { id, pad: "x".repeat(bytes - base.length) } });
      };
      // Sends a 2,500-byte event's headers and half its body, and waits until
      // the server has admitted it: a probe of the tenant is then refused.
      // (Sent again if a probe in flight got it refused.)
      const admittedHeld = async (chunked: boolean) => {
        for (;;) {
          const held = heldPost(server, shop.token, sized(2500, "held"), chunked);
          await until(async () => held.refused() || (await post(server, shop.token, NOT_AN_EVENT)).status === 429);
          if (!held.refused()) return held;
        }
      };

      const held = await admittedHeld(false);
      const refused = await post(server, billing.token, sized(1000, "refused"));
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(refused.body).toEqual({ error: "resource_exhausted", message: "this tenant has too many webhook bytes in flight; retry later" });
      // What still fits is admitted; another tenant is not affected.
      expect((await post(server, shop.token, sized(400, "fits"))).status).toBe(202);
      expect((await post(server, foreign.token, sized(2500, "foreign"))).status).toBe(202);
      expect(await held.finish()).toMatchObject({ status: 202 });
      // Answered: its bytes are free again.
      expect((await post(server, billing.token, sized(1000, "after"))).status).toBe(202);
      const stored = (tenant: string) =>
        sqliteRows<{ id: string }>(server, "select json_extract(payload, '$.id') as id from events where tenant_id = (select id from tenants where slug = ?) order by id", tenant);
      expect(stored("acme").map((r) => r.id)).toEqual(["after", "fits", "held"]);
      expect(stored("other").map((r) => r.id)).toEqual(["foreign"]);

      // A chunked body is charged the body limit; a sender that hangs up frees its share.
      const chunked = await admittedHeld(true);
      expect((await post(server, shop.token, sized(100, "small"))).status).toBe(429);
      chunked.abort();
      await until(async () => (await post(server, shop.token, NOT_AN_EVENT)).status === 400);
      expect((await post(server, shop.token, sized(1000, "freed"))).status).toBe(202);
      expect(stored("acme").map((r) => r.id)).toEqual(["after", "fits", "freed", "held"]);
    } finally {
      await server.close();
    }
  });

  it("answers 503 and stores nothing when the store cannot commit", async () => {
    const server = await startServer({ authenticator: issuer.authenticator(60) });
    try {
      await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
      const { token } = await newSource(server, "s");
      await server.store.close();
      const res = await post(server, token, ORDER);
      expect(res).toMatchObject({ status: 503, body: { error: "unavailable" } });
    } finally {
      await server.app.stop(100);
    }
  });
});
