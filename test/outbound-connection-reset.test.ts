// A kept-alive socket the peer closes just as the next request goes out on
// it: undici reuses it, the request fails with a network error although the
// peer never answered it, and undici does not send a written request again.
// The two outbound POSTs that are safe to repeat (token introspection, an
// OAuth skill's client-credentials token request) are sent once more. The
// peer here answers the first request on each socket and drops the socket on
// the second, so the race is the same on every run.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { Code, type ConnectError } from "@connectrpc/connect";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { OAuthSession } from "../src/integrations/mcp-client/oauth.js";
import type { FetchLike } from "../src/integrations/outbound/guarded-fetch.js";
import { createOutboundFetch } from "../src/integrations/outbound/outbound.js";
import { fetchRetryingReset } from "../src/integrations/outbound/retry-reset.js";
import { listenOnLoopback } from "./support/listen.js";

type Json = Record<string, unknown>;
const AUD = "https://api.agentplane.test";
const now = () => Math.floor(Date.now() / 1000);
// undici puts a socket back in its pool one event-loop turn after the answer
// on it ended (a guard against servers that close despite keep-alive); a
// request sent sooner opens a new socket. Requests in service are further
// apart than that; here, one turn between two that must share a socket.
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Peer {
  url: string;
  // Requests that arrived, answered or dropped.
  requests: () => number;
  // The form bodies of the requests that were answered, in order.
  answered: () => URLSearchParams[];
  close: () => Promise<void>;
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer(handler);
  // undici keeps an idle socket for the server's Keep-Alive hint less a
  // second: long past this file, so the second request always finds the
  // first one's socket (Node's default 5 s hint could lapse on a loaded
  // machine, and the request would then go out on a fresh socket).
  server.keepAliveTimeout = 600_000;
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// How a peer treats a request: answered, dropped with its socket before any
// answer, or dropped after the answer began (headers and part of the body).
type Treatment = "answer" | "drop" | "break";
// The race itself: the first request on a socket is answered, the second
// dropped, as by a peer that closes a kept-alive socket as a request arrives.
const dropReused = (nthOnSocket: number): Treatment => (nthOnSocket > 1 ? "drop" : "answer");

async function startPeer(answer: (form: URLSearchParams) => Json, treat: (nthOnSocket: number) => Treatment): Promise<Peer> {
  const onSocket = new WeakMap<Socket, number>();
  const answered: URLSearchParams[] = [];
  let requests = 0;
  const { url, close } = await listen((req, res) => {
    requests++;
    const nth = (onSocket.get(req.socket) ?? 0) + 1;
    onSocket.set(req.socket, nth);
    const treatment = treat(nth);
    if (treatment === "drop") {
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
      const body = JSON.stringify(answer(form));
      if (treatment === "break") {
        res.writeHead(200, { "content-type": "application/json", "content-length": String(body.length) });
        res.write(body.slice(0, 5), () => req.socket.destroy());
        return;
      }
      answered.push(form);
      res.writeHead(200, { "content-type": "application/json" }).end(body);
    });
  });
  return { url, requests: () => requests, answered: () => [...answered], close };
}

const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(stops.map((stop) => stop()));
});

async function peer(answer: (form: URLSearchParams) => Json, treat: (nthOnSocket: number) => Treatment = dropReused): Promise<Peer> {
  const peer = await startPeer(answer, treat);
  stops.push(peer.close);
  return peer;
}

// An RFC 7662 answer for a good token; its subject names the token.
const activeAnswer = (form: URLSearchParams): Json => ({
  active: true,
  client_id: `client-of-${form.get("token")}`,
  scope: "platform:read",
  aud: [AUD],
  exp: now() + 300,
  iat: now(),
  token_type: "Bearer",
});

const introspectionAt = (idp: Peer) =>
  createAuthenticator({
    mode: "introspection",
    url: `${idp.url}/introspect`,
    clientId: "agentplane",
    clientSecret: "service-secret-0123456789",
    audience: AUD,
    cacheTtlSeconds: 60,
    negativeCacheTtlSeconds: 10,
    timeoutMs: 10_000,
    clockToleranceSeconds: 60,
    maxConcurrent: 32,
    maxQueued: 256,
  });

// How introspecting a token at `idp` was refused; undefined if it was not.
const refusalAt = (idp: Peer) =>
  introspectionAt(idp)
    .authenticate("token-one")
    .then(() => undefined, (err: ConnectError) => err);

describe("token introspection on a reset connection", () => {
  it("validates a second token whose request met the reused socket's reset", async () => {
    const idp = await peer(activeAnswer);
    const authenticator = introspectionAt(idp);

    const first = await authenticator.authenticate("token-one");
    await nextTurn();
    const second = await authenticator.authenticate("token-two").catch((err: Error) => err);

    expect(first.subject).toBe("client-of-token-one");
    expect(second).toMatchObject({ subject: "client-of-token-two" });
    // The dropped request and its second sending, on a new socket.
    expect(idp.requests()).toBe(3);
    expect(idp.answered().map((form) => form.get("token"))).toEqual(["token-one", "token-two"]);
  });

  it("sends a request once more only: a peer that drops every request makes introspection unavailable", async () => {
    const idp = await peer(activeAnswer, () => "drop");

    const refusal = await refusalAt(idp);

    expect(refusal?.code).toBe(Code.Unavailable);
    expect(refusal?.rawMessage).toMatch(/token introspection failed: fetch failed/);
    expect(idp.requests()).toBe(2);
  });

  it("does not ask again once the answer began, though it broke off", async () => {
    const idp = await peer(activeAnswer, () => "break");

    const refusal = await refusalAt(idp);

    expect(refusal?.code).toBe(Code.Unavailable);
    expect(idp.requests()).toBe(1);
  });
});

describe("an OAuth skill's token request on a reset connection", () => {
  it("gets a second token although its request met the reused socket's reset", async () => {
    let issued = 0;
    const tokens = await peer(() => ({ access_token: `skill-token-${++issued}`, token_type: "Bearer", expires_in: 3600 }));
    // Discovery on its own server (another origin, so other sockets): only
    // the token endpoint's socket is reused and dropped.
    let metaUrl = "";
    const meta = await listen((req, res) => {
      const docs: Record<string, Json> = {
        "/.well-known/oauth-protected-resource/mcp": { resource: `${metaUrl}/mcp`, authorization_servers: [metaUrl], scopes_supported: ["mcp:crm"] },
        "/.well-known/oauth-authorization-server": {
          issuer: metaUrl,
          token_endpoint: `${tokens.url}/token`,
          token_endpoint_auth_methods_supported: ["client_secret_basic"],
        },
      };
      const doc = docs[req.url ?? ""];
      req.resume();
      if (doc) res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(doc));
      else res.writeHead(404).end();
    });
    stops.push(meta.close);
    metaUrl = meta.url;

    const fetch = createOutboundFetch({ allow: ["127.0.0.0/8"], maxResponseBytes: 1 << 20 });
    const config = { mcpUrl: `${metaUrl}/mcp`, issuer: metaUrl, scopes: ["mcp:crm"], audience: "", clientId: "skill-client", clientSecret: "skill-secret" };
    const outcomes: string[] = [];
    const session = new OAuthSession(config, fetch, 10_000, (outcome) => outcomes.push(outcome));

    const first = await session.authenticate(undefined);
    // A token refused by the MCP server (or expired) is asked for again.
    session.invalidate();
    await nextTurn();
    const second = await session.authenticate(undefined).catch((err: Error) => err.message);

    expect(first).toBe("skill-token-1");
    expect(second).toBe("skill-token-2");
    expect(outcomes).toEqual(["ok", "ok"]);
    expect(tokens.requests()).toBe(3);
    expect(tokens.answered().map((form) => form.get("grant_type"))).toEqual(["client_credentials", "client_credentials"]);
  });
});

describe("what is not sent again", () => {
  const guarded = createOutboundFetch({ allow: ["127.0.0.0/8"], maxResponseBytes: 1 << 20 });
  const form = () => ({ method: "POST", body: new URLSearchParams({ grant_type: "client_credentials" }) });

  it("a refused connection: nothing listens, and a second try would meet the same closed port", async () => {
    const gone = await listen((_req, res) => void res.end());
    await gone.close();
    let calls = 0;
    const counted: FetchLike = (url, init) => {
      calls++;
      return guarded(url, init);
    };

    const failure = await fetchRetryingReset(counted, `${gone.url}/token`, form()).catch((err: Error) => err);

    expect(failure).toMatchObject({ cause: { code: "ECONNREFUSED" } });
    expect(calls).toBe(1);
  });

  it("a request whose caller gave up (its signal aborted), even when the connection broke too", async () => {
    const caller = new AbortController();
    let calls = 0;
    const resetAsAborted: FetchLike = () => {
      calls++;
      caller.abort();
      return Promise.reject(new TypeError("fetch failed", { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) }));
    };

    await expect(fetchRetryingReset(resetAsAborted, "http://127.0.0.1:1/token", { ...form(), signal: caller.signal })).rejects.toThrow("fetch failed");
    expect(calls).toBe(1);
  });
});
