// What a stranger without credentials can do to a tenant's webhook intake
// (issue 19, items 5 and 8): trickling bodies at a known signed-source URL
// spends none of the tenant's bytes in flight; a captured GitHub body cannot
// be replayed under a new delivery id or event header; unknown tokens and
// source ids cost one store query per key, not one per request.
import { randomBytes } from "node:crypto";
import { request, type IncomingMessage } from "node:http";
import { sign as githubSign } from "@octokit/webhooks-methods";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectMust, sqliteRows, startServer, type TestServer } from "./support/server.js";

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
    const stranger = trickle(github.url, githubSized(4000, "stranger"), { "x-github-event": "push", "x-github-delivery": "x", "x-hub-signature-256": `sha256=${"0".repeat(64)}` });
    expect(await stranger.answered).toEqual({
      status: 408,
      body: { error: "deadline_exceeded", message: "the body of a signed delivery must arrive within 200 ms" },
      connection: "close",
    });
  });
});
