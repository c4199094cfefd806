// What a stranger without credentials can do to a tenant's webhook intake
// (issue 19, items 5 and 8): trickling bodies at a known signed-source URL
// spends none of the tenant's bytes in flight; a captured GitHub body cannot
// be replayed under a new delivery id or event header; unknown tokens and
// source ids cost one store query per key, not one per request.
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { request, type IncomingMessage } from "node:http";
import { sign as githubSign } from "@octokit/webhooks-methods";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { SecretBox } from "../src/lib/secret-box.js";
import { webhookTokenDigest } from "../src/lib/webhook-token.js";
import { LookupCache } from "../src/service/lookup-cache.js";
import { signingSecretContext } from "../src/service/webhook-deliveries.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectMust, sourcesChanged, sqliteRows, startServer, type TestServer } from "./support/server.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let admin: string;

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
});

const api = (server: TestServer, method: string, body: unknown, tenant = "acme") => connectMust(server, method, body, bearer(admin, tenant));

async function envelopeSource(server: TestServer, name: string): Promise<{ id: string; token: string }> {
  const body = await api(server, "CreateWebhookSource", { webhookSource: { name } });
  return { id: (body.webhookSource as Json).id as string, token: body.token as string };
}

async function githubSource(server: TestServer, name: string): Promise<{ id: string; url: string; secret: string }> {
  const body = await api(server, "CreateWebhookSource", { webhookSource: { name, kind: "WEBHOOK_SOURCE_KIND_GITHUB" } });
  const source = body.webhookSource as Json;
  return { id: source.id as string, url: source.url as string, secret: body.signingSecret as string };
}

interface Answer {
  status: number;
  body: Json;
}

async function send(url: string, body: string, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
}

const postEvent = (server: TestServer, token: string, body: string) => send(`${server.url}/webhooks/events`, body, { "x-webhook-token": token });

async function githubHeaders(secret: string, body: string, event: string, delivery = randomBytes(16).toString("hex")) {
  return { "x-github-event": event, "x-github-delivery": delivery, "x-hub-signature-256": await githubSign(secret, body) };
}

// An event (envelope) or a GitHub body of exactly `bytes` bytes.
function sized(bytes: number, id: string): string {
  const base = JSON.stringify({ event_type: "order.created", payload: { id, pad: "" } });
  return JSON.stringify({ event_type: "order.created", payload: { id, pad: "x".repeat(bytes - base.length) } });
}
function githubSized(bytes: number, id: string): string {
  const base = JSON.stringify({ action: "opened", id, pad: "" });
  return JSON.stringify({ action: "opened", id, pad: "x".repeat(bytes - base.length) });
}

async function until(check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check()); await new Promise((r) => setTimeout(r, 10)))
    if (Date.now() > deadline) throw new Error("the condition did not hold in time");
}

// The server's side of each request to `path`, as Node hands it to Fastify:
// a test waits on it until the server has started reading a body.
function serverRequests(server: TestServer, path: string): IncomingMessage[] {
  const seen: IncomingMessage[] = [];
  server.app.server.server.on("request", (req: IncomingMessage) => {
    if (req.url === path) seen.push(req);
  });
  return seen;
}

// Requests a test left open, hung up before its server closes.
const open = new Set<{ destroy(): void }>();

// A request whose headers (with the body's length) and first byte are sent,
// the rest only on finish(): a sender trickling its body.
function trickle(url: string, body: string, headers: Record<string, string>) {
  const req = request(url, { method: "POST", headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), ...headers } });
  const answered = new Promise<Answer & { connection?: string }>((resolve, reject) => {
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text ? (JSON.parse(text) as Json) : {}, connection: res.headers.connection }));
    });
    req.on("error", reject);
  });
  answered.catch(() => {}); // aborted on purpose, or read by the test
  open.add(req);
  req.write(body.slice(0, 1));
  return {
    answered,
    finish: () => {
      req.end(body.slice(1));
      return answered;
    },
    abort: () => {
      open.delete(req);
      req.destroy();
    },
  };
}

describe("a stranger trickling bodies at a signed source's URL", () => {
  let server: TestServer;
  afterEach(async () => {
    for (const req of open) req.destroy();
    open.clear();
    await server?.close();
  });

  it("spends none of the tenant's bytes in flight: its envelope and signed webhooks still get 202", async () => {
    server = await startServer({
      authenticator: issuer.authenticator(60),
      webhook: { maxBytes: 4096, ratePerSecond: 1000, burst: 1000, tenantInflightBytes: 3000 },
    });
    await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    const envelope = await envelopeSource(server, "shop");
    const github = await githubSource(server, "repo");
    const reading = serverRequests(server, new URL(github.url).pathname);

    const forged = { "x-github-event": "push", "x-github-delivery": "x", "x-hub-signature-256": `sha256=${"0".repeat(64)}` };
    const signed = async (id: string) => {
      const body = githubSized(2500, id);
      return send(github.url, body, await githubHeaders(github.secret, body, "pull_request"));
    };

    // A body near the limit with a forged signature, being read: before the
    // fix its declared length was the tenant's, and everything else 429.
    const stranger = trickle(github.url, githubSized(4000, "stranger"), forged);
    await until(() => reading[0]?.readableFlowing === true);
    expect(await postEvent(server, envelope.token, sized(2500, "envelope"))).toMatchObject({ status: 202 });
    expect(await signed("signed")).toMatchObject({ status: 202 });

    // Ten more connections of the stranger's change nothing.
    const more = serverRequests(server, new URL(github.url).pathname);
    for (let i = 0; i < 10; i++) trickle(github.url, githubSized(4000, "stranger"), forged);
    await until(() => more.length === 10 && more.every((r) => r.readableFlowing === true));
    expect(await postEvent(server, envelope.token, sized(2500, "envelope again"))).toMatchObject({ status: 202 });
    expect(await signed("signed again")).toMatchObject({ status: 202 });

    // The stranger's body, once in, is refused by its signature.
    expect(await stranger.finish()).toMatchObject({ status: 401, body: { error: "unauthenticated" } });
    const stored = sqliteRows<{ id: string }>(server, "select json_extract(payload, '$.id') as id from events order by id");
    expect(stored.map((r) => r.id)).toEqual(["envelope", "envelope again", "signed", "signed again"]);
  });

  it("charges a signed delivery to its tenant once verified: past the budget, 429", async () => {
    server = await startServer({
      authenticator: issuer.authenticator(60),
      webhook: { maxBytes: 4096, ratePerSecond: 1000, burst: 1000, tenantInflightBytes: 3000 },
    });
    await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    const envelope = await envelopeSource(server, "shop");
    const github = await githubSource(server, "repo");
    const reading = serverRequests(server, "/webhooks/events");
    // The tenant's own envelope body, authenticated and half sent, holds 2,500 bytes.
    const held = trickle(`${server.url}/webhooks/events`, sized(2500, "held"), { "x-webhook-token": envelope.token });
    await until(() => reading[0]?.readableFlowing === true);

    const body = githubSized(1000, "over");
    const refused = await send(github.url, body, await githubHeaders(github.secret, body, "pull_request"));
    expect(refused).toEqual({ status: 429, body: { error: "resource_exhausted", message: "this tenant has too many webhook bytes in flight; retry later" } });
    held.abort();
    await until(async () => (await send(github.url, body, await githubHeaders(github.secret, body, "pull_request"))).status === 202);
  });

  it("answers 408 and closes the connection when an unverified body is not in within the signed body timeout", async () => {
    server = await startServer({
      authenticator: issuer.authenticator(60),
      webhook: { maxBytes: 4096, ratePerSecond: 1000, burst: 1000, signedBodyTimeoutMs: 200 },
      // Node's own request timeout is far away: the 408 is the webhook's.
      http: { requestTimeoutMs: 120_000, headersTimeoutMs: 60_000 },
    });
    await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    const github = await githubSource(server, "repo");
    // A body no one reads (answered 415 first) leaves no timer behind to fail.
    const unread = trickle(github.url, "x".repeat(4000), { "content-type": "text/plain" });
    expect(await unread.answered).toMatchObject({ status: 415 });
    const stranger = trickle(github.url, githubSized(4000, "stranger"), { "x-github-event": "push", "x-github-delivery": "x", "x-hub-signature-256": `sha256=${"0".repeat(64)}` });
    expect(await stranger.answered).toEqual({
      status: 408,
      body: { error: "deadline_exceeded", message: "the body of a signed delivery must arrive within 200 ms" },
      connection: "close",
    });
  });
});

describe("a captured GitHub delivery", () => {
  let server: TestServer;
  afterAll(() => server?.close());

  it("is a duplicate under a new delivery id or event header; a redelivery from GitHub too", async () => {
    server = await startServer({ authenticator: issuer.authenticator(60), webhook: { maxBytes: 8192, ratePerSecond: 1000, burst: 1000 } });
    await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    const github = await githubSource(server, "repo");
    const body = JSON.stringify({ action: "opened", number: 7, pull_request: { title: "t" } });
    const digest = `sha256:${createHash("sha256").update(body).digest("hex")}`;

    const first = await send(github.url, body, await githubHeaders(github.secret, body, "pull_request", "delivery-1"));
    expect(first).toMatchObject({ status: 202 });
    const duplicate = { status: 200, body: { event_id: first.body.event_id, duplicate: true } };
    // GitHub's own redelivery: the same id and body.
    expect(await send(github.url, body, await githubHeaders(github.secret, body, "pull_request", "delivery-1"))).toEqual(duplicate);
    // The body replayed by whoever captured it, under headers GitHub does not sign.
    expect(await send(github.url, body, await githubHeaders(github.secret, body, "pull_request", "delivery-2"))).toEqual(duplicate);
    expect(await send(github.url, body, await githubHeaders(github.secret, body, "issues", "delivery-3"))).toEqual(duplicate);
    expect(await send(github.url, body, { "x-github-event": "release", "x-hub-signature-256": await githubSign(github.secret, body) })).toEqual(duplicate);

    const events = sqliteRows<{ event_type: string; idempotency_key: string }>(server, "select event_type, idempotency_key from events");
    expect(events).toEqual([{ event_type: "github.pull_request.opened", idempotency_key: digest }]);
    // Another body is another event.
    const other = JSON.stringify({ action: "closed", number: 7, pull_request: { title: "t" } });
    expect(await send(github.url, other, await githubHeaders(github.secret, other, "pull_request", "delivery-1"))).toMatchObject({ status: 202 });
  });
});

describe.each(["sqlite", "postgres"] as const)("unknown tokens and source ids (%s)", (engine) => {
  let server: TestServer;
  afterAll(() => server?.close());

  // The store's source lookups, by key, as the server makes them.
  function countLookups(s: TestServer) {
    const byDigest: string[] = [];
    const byId: string[] = [];
    const webhooks = s.store.webhooks;
    const findByDigest = webhooks.findSourceByTokenDigest.bind(webhooks);
    const findById = webhooks.findSourceById.bind(webhooks);
    webhooks.findSourceByTokenDigest = (digest, now) => (byDigest.push(digest), findByDigest(digest, now));
    webhooks.findSourceById = (id) => (byId.push(id), findById(id));
    return { byDigest, byId };
  }

  it("cost one store query per key while unknown; a source created with that key works once the store signals it", async () => {
    const secrets = new SecretBox(randomBytes(32));
    server = await startServer({ authenticator: issuer.authenticator(60), store: engine, secrets, webhook: { maxBytes: 4096, ratePerSecond: 1000, burst: 1000 } });
    const tenantId = await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    const lookups = countLookups(server);
    const event = JSON.stringify({ event_type: "order.created", payload: { id: "o-1" } });
    const unauthenticated = { status: 401, body: { error: "unauthenticated", message: "invalid or missing webhook token" } };

    // One unknown token, 10 posts at once and 10 one after another.
    const token = `whk_${randomBytes(32).toString("base64url")}`;
    for (const res of await Promise.all(Array.from({ length: 10 }, () => postEvent(server, token, event)))) expect(res).toEqual(unauthenticated);
    for (let i = 0; i < 10; i++) expect(await postEvent(server, token, event)).toEqual(unauthenticated);
    expect(lookups.byDigest).toEqual([webhookTokenDigest(token)]);
    // Another unknown token is another query.
    const other = `whk_${randomBytes(32).toString("base64url")}`;
    expect(await postEvent(server, other, event)).toEqual(unauthenticated);
    expect(lookups.byDigest).toEqual([webhookTokenDigest(token), webhookTokenDigest(other)]);

    // The same for a signed source's id in the URL.
    const id = `src_${randomUUID()}`;
    const url = `${server.url}/webhooks/sources/${id}`;
    const secret = randomBytes(32).toString("hex");
    const push = JSON.stringify({ ref: "refs/heads/main" });
    for (const res of await Promise.all(Array.from({ length: 10 }, async () => send(url, push, await githubHeaders(secret, push, "push")))))
      expect(res).toEqual(unauthenticated);
    for (let i = 0; i < 10; i++) expect(await send(url, push, await githubHeaders(secret, push, "push"))).toEqual(unauthenticated);
    expect(lookups.byId).toEqual([id]);

    // Sources with that token and that id (through the store, the only way to
    // choose them): the change signal forgets the misses at once.
    const t = Date.now();
    const fields = { tenantId, enabled: true, createTime: t, updateTime: t };
    let changed = sourcesChanged(server);
    await server.store.webhookSources.insert({ ...fields, id: `src_${randomUUID()}`, name: "late", kind: "envelope", tokenDigest: webhookTokenDigest(token) });
    await changed;
    expect(await postEvent(server, token, event)).toMatchObject({ status: 202 });
    changed = sourcesChanged(server);
    await server.store.webhookSources.insert({ ...fields, id, name: "late-signed", kind: "github", signingSecret: secrets.seal(secret, signingSecretContext(id)) });
    await changed;
    expect(await send(url, push, await githubHeaders(secret, push, "push"))).toMatchObject({ status: 202 });
  });

  it("forgets a miss when another process creates the source", async () => {
    const other = await startServer({
      authenticator: issuer.authenticator(60),
      ...(engine === "sqlite" ? { dir: server.dir } : { store: "postgres" as const, databaseUrl: server.databaseUrl }),
    });
    try {
      const tenant = await other.store.tenants.get("acme");
      const token = `whk_${randomBytes(32).toString("base64url")}`;
      const event = JSON.stringify({ event_type: "order.created", payload: { id: "o-2" } });
      expect(await postEvent(server, token, event)).toMatchObject({ status: 401 });
      const changed = sourcesChanged(server);
      const t = Date.now();
      await other.store.webhookSources.insert({
        id: `src_${randomUUID()}`,
        tenantId: tenant!.id,
        name: "elsewhere",
        enabled: true,
        kind: "envelope",
        tokenDigest: webhookTokenDigest(token),
        createTime: t,
        updateTime: t,
      });
      await changed;
      expect(await postEvent(server, token, event)).toMatchObject({ status: 202 });
    } finally {
      await other.close();
    }
  });
});

describe("the list of unknown keys", () => {
  it("holds at most its number of entries, oldest out first, each for its time", async () => {
    let now = 0;
    const cache = new LookupCache<string>({ maxEntries: 10, maxWeight: 10 }, undefined, { maxEntries: 3, ttlMs: 1000 }, () => now);
    const asked: string[] = [];
    const absent = (key: string) => cache.load(key, async () => (asked.push(key), undefined));
    for (const key of ["a", "b", "c", "d"]) await absent(key);
    // "a" went out for "d"; the others are still known absent.
    for (const key of ["b", "c", "d", "a"]) await absent(key);
    expect(asked).toEqual(["a", "b", "c", "d", "a"]);
    now = 1000;
    await absent("c");
    expect(asked.at(-1)).toBe("c");
  });
});
