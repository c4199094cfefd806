// Every request the service makes on a tenant's behalf (model providers,
// skills, their OAuth metadata and token endpoints) goes through the outbound
// guard: refused addresses, redirects that would carry credentials elsewhere,
// and upstream error bodies that must not reach a run's error verbatim.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { AddressPolicy } from "../src/integrations/outbound/address-policy.js";
import { createGuardedFetch, OutboundBlockedError } from "../src/integrations/outbound/guarded-fetch.js";
import { reservePort, startOAuthMcp, startOpenMcp, startStaticBearerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { listenOnLoopback } from "./support/listen.js";
import { startModelServer } from "./support/model-server.js";
import { startIdp } from "./support/oidc-idp.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";

type Json = Record<string, unknown>;
const SCOPE = "mcp:crm";

interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

// A loopback HTTP server that records every request it gets, whatever it is.
async function startRecorder(answer: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => void res.writeHead(405).end()) {
  const seen: Recorded[] = [];
  const server = createServer((req, res) => {
    seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers });
    req.resume();
    req.on("end", () => answer(req, res));
  });
  const port = await listenOnLoopback(server);
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    requests: () => [...seen],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let issuer: DevIssuer;
let admin: string;
// No allow-list: loopback is refused, as in production.
let strict: TestServer;
// Loopback allowed, so the fixtures can be reached.
let open: TestServer;

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  [strict, open] = await Promise.all([
    startServer({ authenticator: issuer.authenticator(60), runtime: { executor: "agents" } }),
    startServer({ authenticator: issuer.authenticator(60), runtime: { executor: "agents" }, outboundAllow: ["127.0.0.0/8"] }),
  ]);
  for (const s of [strict, open]) await s.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
});
afterAll(() => Promise.all([strict.close(), open.close()]));

async function api(on: TestServer, method: string, body: unknown): Promise<{ status: number; body: Json }> {
  const res = await connectCall(on, method, body, bearer(admin, "acme"));
  return { status: res.status, body: res.body };
}

async function must(on: TestServer, method: string, body: unknown): Promise<Json> {
  const res = await api(on, method, body);
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function waitForRun(on: TestServer, id: string): Promise<Json> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const run = (await must(on, "GetRun", { id })).run as Json;
    if (!["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string)) return run;
    if (Date.now() > deadline) throw new Error(`run ${id} still ${String(run.status)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

let names = 0;
const unique = (prefix: string) => `${prefix}-${++names}`;

async function runModelAgent(on: TestServer, baseUrl: string): Promise<Json> {
  const agent = (await must(on, "CreateAgent", { agent: { name: unique("model"), model: { baseUrl, model: "scripted-1", apiKey: "sk-tenant-model-key" } } })).agent as Json;
  return waitForRun(on, ((await must(on, "RunAgent", { id: agent.id, input: { q: "hi" } })).run as Json).id as string);
}

async function createSkill(on: TestServer, skill: Json): Promise<Json> {
  return (await must(on, "CreateSkill", { skill: { name: unique("skill"), ...skill } })).skill as Json;
}

async function runTool(on: TestServer, skillId: string, tool: string, args: string): Promise<Json> {
  const agent = (await must(on, "CreateAgent", { agent: { name: unique("call"), skillIds: [skillId], steps: [{ skillId, tool, arguments: args }] } })).agent as Json;
  return waitForRun(on, ((await must(on, "RunAgent", { id: agent.id })).run as Json).id as string);
}

// The deadline is room for any load, not a measure.
async function until(what: string, done: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("model providers go through the outbound guard", () => {
  it("refuses a loopback base_url without the allow-list and sends the API key nowhere", async () => {
    const recorder = await startRecorder();
    try {
      const run = await runModelAgent(strict, `${recorder.url}/v1`);
      expect(run.status).toBe("RUN_STATUS_FAILED");
      expect(run.error).toContain("outbound_blocked");
      expect(run.error).toContain("127.0.0.1");
      expect(run.error).toContain("AGENTPLANE_OUTBOUND_ALLOW");
      expect((run.steps as Json[])[0]).toMatchObject({ kind: "STEP_KIND_MODEL_CALL", error: expect.stringContaining("outbound_blocked") });
      expect(recorder.requests()).toEqual([]);
    } finally {
      await recorder.close();
    }
  });

  it("reaches the same model server once the allow-list permits loopback", async () => {
    const model = await startModelServer([{ content: "allowed" }]);
    try {
      const run = await runModelAgent(open, model.baseUrl);
      expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: "allowed" });
      expect(model.authorizations()).toEqual(["Bearer sk-tenant-model-key"]);
    } finally {
      await model.close();
    }
  });

  it.each([
    [401, "model_unauthorized", "Unauthorized: key sk-tenant-model-key rejected by gateway SECRET-MARKER-401"],
    [500, "model_error", "<html><body><h1>500</h1><pre>db-7.internal SECRET-MARKER-500 stack trace</pre></body></html>"],
  ])("keeps the status and kind of a %i but not its raw body", async (status, kind, body) => {
    const model = await startModelServer(() => ({ status, body }));
    try {
      const run = await runModelAgent(open, model.baseUrl);
      expect(run.status).toBe("RUN_STATUS_FAILED");
      expect(run.error).toContain(kind);
      expect(run.error).toContain(`HTTP ${status}`);
      expect(JSON.stringify(run)).not.toContain("SECRET-MARKER");
      expect(JSON.stringify(run)).not.toContain("sk-tenant-model-key");
      expect(model.requests().length).toBeGreaterThan(0);
    } finally {
      await model.close();
    }
  });

  it("keeps a short, cleaned reason from an OpenAI-style JSON error", async () => {
    const model = await startModelServer([{ status: 404, body: { error: { message: "The model\u0007 `scripted-1`\n does not exist" + " pad".repeat(200), type: "invalid_request_error", code: "model_not_found" } } }]);
    try {
      const run = await runModelAgent(open, model.baseUrl);
      expect(run.status).toBe("RUN_STATUS_FAILED");
      expect(run.error).toContain("model_error");
      expect(run.error).toContain("HTTP 404");
      expect(run.error).toContain("model_not_found");
      expect(run.error).toContain("The model `scripted-1` does not exist");
      expect(run.error).not.toMatch(/\p{Cc}/u);
      expect((run.error as string).length).toBeLessThan(400);
    } finally {
      await model.close();
    }
  });
});

describe("skill servers' error bodies stay out of errors", () => {
  const page = "<html><body>proxy error at 10.1.2.3 SECRET-MARKER-SKILL</body></html>";

  it.each([
    [401, "skill_unauthorized"],
    [500, "skill_error"],
    [403, "skill_unauthorized"],
  ])("keeps the status and kind of a %i, not its HTML page", async (status, kind) => {
    const broken = await startRecorder((_req, res) => void res.writeHead(status, { "content-type": "text/html" }).end(page));
    try {
      const skill = await createSkill(open, { mcpUrl: `${broken.url}/mcp`, auth: { staticBearer: { token: "bearer-secret" } } });
      expect(skill.toolsRefreshError).toContain(kind);
      expect(skill.toolsRefreshError).toContain(`HTTP ${status}`);
      expect(skill.toolsRefreshError).not.toContain("SECRET-MARKER");
      const run = await runTool(open, skill.id as string, "echo", '{"text": "x"}');
      expect(run.status).toBe("RUN_STATUS_FAILED");
      expect(JSON.stringify(run)).not.toContain("SECRET-MARKER");
    } finally {
      await broken.close();
    }
  });

  it("keeps a token endpoint's OAuth error, cleaned and short, and none of an HTML one", async () => {
    let tokenAnswer: [number, string, string] = [400, "application/json", ""];
    const as = await startRecorder((req, res) => {
      if (req.url === "/.well-known/oauth-authorization-server")
        return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ issuer: as.url, token_endpoint: `${as.url}/token` }));
      if (req.url === "/token") return void res.writeHead(tokenAnswer[0], { "content-type": tokenAnswer[1] }).end(tokenAnswer[2]);
      res.writeHead(404).end();
    });
    const mcp = await startOAuthMcp({ issuer: as.url, jwksUrl: `${as.url}/jwks`, requiredScope: SCOPE });
    try {
      const auth = { oauth: { issuer: as.url, clientId: "agentplane", clientSecret: "s3cret" } };
      tokenAnswer = [400, "application/json", JSON.stringify({ error: "invalid_client", error_description: "client\u001b[31m unknown " + "x".repeat(500) })];
      const json = await createSkill(open, { mcpUrl: mcp.url, auth });
      expect(json.toolsRefreshError).toContain("skill_auth_failed (token request)");
      expect(json.toolsRefreshError).toContain("HTTP 400 invalid_client: client [31m unknown");
      expect(json.toolsRefreshError).not.toContain("\u001b");
      expect((json.toolsRefreshError as string).length).toBeLessThan(400);
      tokenAnswer = [500, "text/html", page];
      const html = await createSkill(open, { mcpUrl: mcp.url, auth });
      expect(html.toolsRefreshError).toContain("HTTP 500");
      expect(html.toolsRefreshError).not.toContain("SECRET-MARKER");
    } finally {
      await mcp.close();
      await as.close();
    }
  });
});

describe("URL forms that reach loopback or metadata are refused", () => {
  let recorder: Awaited<ReturnType<typeof startRecorder>>;
  beforeAll(async () => {
    recorder = await startRecorder();
  });
  afterAll(() => recorder.close());

  // Teredo: server 65.54.227.120, client 127.0.0.1 stored complemented.
  const hosts = [
    ["IPv4-compatible", "[::127.0.0.1]"],
    ["IPv4-compatible metadata", "[::a9fe:a9fe]"],
    ["IPv4-mapped", "[::ffff:7f00:1]"],
    ["6to4", "[2002:7f00:1::]"],
    ["NAT64", "[64:ff9b::a9fe:a9fe]"],
    ["Teredo", "[2001:0:4136:e378:8000:63bf:80ff:fffe]"],
    ["decimal IPv4", "2130706433"],
    ["hex IPv4", "0x7f.1"],
    ["short IPv4", "127.1"],
  ];

  it.each(hosts)("refuses a skill at %s %s", async (_form, host) => {
    const skill = await createSkill(strict, { mcpUrl: `http://${host}:${recorder.port}/mcp` });
    expect(skill.toolsRefreshError).toContain("outbound_blocked");
    expect(skill.toolsRefreshError).toContain("AGENTPLANE_OUTBOUND_ALLOW");
    expect(recorder.requests()).toEqual([]);
  });

  it.each(hosts)("refuses a model at %s %s", async (_form, host) => {
    const run = await runModelAgent(strict, `http://${host}:${recorder.port}/v1`);
    expect(run.status).toBe("RUN_STATUS_FAILED");
    expect(run.error).toContain("outbound_blocked");
    expect(recorder.requests()).toEqual([]);
  });

  it.each([
    ["a fragment", "http://api.example.com/v1#", "fragment"],
    ["a query", "http://api.example.com/v1?x=", "query"],
    ["credentials", "http://user:pw@api.example.com/v1", "credentials"],
    ["another scheme", "file:///etc/passwd", "http or https"],
  ])("refuses a model base_url with %s", async (_what, baseUrl, message) => {
    const res = await api(strict, "CreateAgent", { agent: { name: unique("bad"), model: { baseUrl, model: "m" } } });
    expect(res).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
    expect(res.body.message).toContain("agent.model.base_url");
    expect(res.body.message).toContain(message);
  });

  it("refuses a skill mcp_url with a fragment", async () => {
    const res = await api(strict, "CreateSkill", { skill: { name: unique("frag"), mcpUrl: "https://mcp.example.com/mcp#/other" } });
    expect(res).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
    expect(res.body.message).toContain("skill.mcp_url");
    expect(res.body.message).toContain("fragment");
  });
});

describe("redirects never carry credentials to another origin", () => {
  let target: Awaited<ReturnType<typeof startRecorder>>;
  beforeEach(async () => {
    target = await startRecorder();
  });
  afterEach(() => target.close());

  const credentialsSeen = () => target.requests().filter((r) => r.headers.authorization || r.headers.cookie);

  it("static bearer: the SDK's GET stream redirected elsewhere loses the token", async () => {
    const mcp = await startStaticBearerMcp("bearer-secret", { redirect: { method: "GET", to: `${target.url}/mcp` } });
    try {
      const skill = await createSkill(open, { mcpUrl: mcp.url, auth: { staticBearer: { token: "bearer-secret" } } });
      const run = await runTool(open, skill.id as string, "echo", '{"text": "x"}');
      expect(run.status).toBe("RUN_STATUS_SUCCEEDED");
      await until("the GET stream to be redirected", () => mcp.redirects() > 0);
      await new Promise((r) => setTimeout(r, 300));
      expect(credentialsSeen()).toEqual([]);
    } finally {
      await mcp.close();
    }
  });

  it("static bearer: a POST redirected elsewhere is not followed", async () => {
    const mcp = await startStaticBearerMcp("bearer-secret", { redirect: { method: "POST", to: `${target.url}/mcp` } });
    try {
      const skill = await createSkill(open, { mcpUrl: mcp.url, auth: { staticBearer: { token: "bearer-secret" } } });
      expect(skill.toolsRefreshError).toBeTruthy();
      expect(mcp.redirects()).toBeGreaterThan(0);
      expect(target.requests()).toEqual([]);
    } finally {
      await mcp.close();
    }
  });

  describe("OAuth", () => {
    it("the GET stream redirected elsewhere loses the access token; a redirected POST is not followed", async () => {
      const port = await reservePort();
      const idp = await startIdp({ clients: [{ clientId: "agentplane", clientSecret: "s3cret", scope: SCOPE }], scopes: [SCOPE], audience: `http://127.0.0.1:${port}/mcp`, accessTokenFormat: "jwt" });
      const auth = { oauth: { issuer: idp.issuer, clientId: "agentplane", clientSecret: "s3cret" } };
      try {
        const mcp = await startOAuthMcp({ port, issuer: idp.issuer, jwksUrl: idp.jwksUrl, requiredScope: SCOPE, redirect: { method: "GET", to: `${target.url}/mcp` } });
        try {
          const skill = await createSkill(open, { mcpUrl: mcp.url, auth });
          expect(skill.toolsRefreshError).toBeUndefined();
          const run = await runTool(open, skill.id as string, "echo", '{"text": "x"}');
          expect(run.status).toBe("RUN_STATUS_SUCCEEDED");
          await until("the GET stream to be redirected", () => mcp.redirects() > 0);
          await new Promise((r) => setTimeout(r, 300));
          expect(credentialsSeen()).toEqual([]);
        } finally {
          await mcp.close();
        }
        const posting = await startOAuthMcp({ port, issuer: idp.issuer, jwksUrl: idp.jwksUrl, requiredScope: SCOPE, redirect: { method: "POST", to: `${target.url}/mcp` } });
        try {
          const skill = await createSkill(open, { mcpUrl: posting.url, auth });
          expect(skill.toolsRefreshError).toBeTruthy();
          expect(posting.redirects()).toBeGreaterThan(0);
          expect(target.requests()).toEqual([]);
        } finally {
          await posting.close();
        }
      } finally {
        await idp.stop();
      }
    });

    it("a token endpoint that redirects is not followed and fails the token request clearly", async () => {
      const as = await startRecorder((req, res) => {
        if (req.url === "/.well-known/oauth-authorization-server")
          return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ issuer: as.url, token_endpoint: `${as.url}/token` }));
        if (req.url === "/token") return void res.writeHead(302, { location: `${target.url}/token` }).end();
        res.writeHead(404).end();
      });
      const mcp = await startOAuthMcp({ issuer: as.url, jwksUrl: `${as.url}/jwks`, requiredScope: SCOPE });
      try {
        const skill = await createSkill(open, { mcpUrl: mcp.url, auth: { oauth: { issuer: as.url, clientId: "agentplane", clientSecret: "s3cret" } } });
        expect(skill.toolsRefreshError).toContain("skill_auth_failed (token request)");
        expect(skill.toolsRefreshError).toContain("redirect");
        expect(as.requests().filter((r) => r.url === "/token")).toHaveLength(1);
        expect(target.requests()).toEqual([]);
      } finally {
        await mcp.close();
        await as.close();
      }
    });
  });

  describe("the guarded fetch following a redirect itself", () => {
    const guarded = createGuardedFetch({ policy: new AddressPolicy(["127.0.0.1/32"]), maxResponseBytes: 1 << 20 });
    const sent = { authorization: "Bearer t0ken", cookie: "session=1", "proxy-authorization": "Basic eA==", "x-api-key": "header-secret", accept: "application/json" };

    it("drops every credential header on a hop to another origin, keeps them within the origin", async () => {
      const source = await startRecorder((req, res) => {
        if (req.url === "/same") return void res.writeHead(302, { location: "/landed" }).end();
        if (req.url === "/landed") return void res.writeHead(200).end("ok");
        res.writeHead(302, { location: `${target.url}/elsewhere` }).end();
      });
      try {
        expect((await guarded(`${source.url}/cross`, { headers: sent })).status).toBe(405);
        const [hop] = target.requests();
        expect(hop!.headers).toMatchObject({ accept: "application/json" });
        for (const name of ["authorization", "cookie", "proxy-authorization", "x-api-key"]) expect([name, hop!.headers[name]]).toEqual([name, undefined]);

        expect((await guarded(`${source.url}/same`, { headers: sent })).status).toBe(200);
        expect(source.requests().at(-1)).toMatchObject({ url: "/landed", headers: { authorization: "Bearer t0ken", "x-api-key": "header-secret" } });
      } finally {
        await source.close();
      }
    });

    it("checks every hop against the address policy", async () => {
      const source = await startRecorder((_req, res) => void res.writeHead(302, { location: "http://[::ffff:a9fe:a9fe]/latest/meta-data/" }).end());
      try {
        await expect(guarded(source.url)).rejects.toThrow(OutboundBlockedError);
        await expect(guarded(source.url)).rejects.toThrow("AGENTPLANE_OUTBOUND_ALLOW");
      } finally {
        await source.close();
      }
    });

    it("answers a redirect with an error when asked to (token requests)", async () => {
      const source = await startRecorder((_req, res) => void res.writeHead(307, { location: `${target.url}/token` }).end());
      try {
        await expect(guarded(source.url, { method: "POST", body: "x", headers: sent, redirect: "error" })).rejects.toThrow(/redirect/);
        expect(target.requests()).toEqual([]);
      } finally {
        await source.close();
      }
    });
  });
});

describe("the guarded fetch answers as fetch would", () => {
  const guarded = createGuardedFetch({ policy: new AddressPolicy(["127.0.0.1/32"]), maxResponseBytes: 1024 });

  it("sends fetch's default headers and a form's content type", async () => {
    const server = await startRecorder((_req, res) => void res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}'));
    try {
      const res = await guarded(server.url, { method: "POST", body: new URLSearchParams({ a: "1" }) });
      expect([res.status, await res.json()]).toEqual([200, { ok: true }]);
      expect(server.requests()[0]!.headers).toMatchObject({
        accept: "*/*",
        "user-agent": expect.stringMatching(/^agentplane\//),
        "content-type": "application/x-www-form-urlencoded;charset=UTF-8",
        "content-length": "3",
      });
    } finally {
      await server.close();
    }
  });

  it("refuses a declared length over the limit at once, and errors a longer chunked body as it is read", async () => {
    const server = await startRecorder((req, res) => {
      if (req.url === "/declared") return void res.writeHead(200, { "content-length": "2048" }).end("x".repeat(2048));
      // A stream that does not end.
      if (req.url === "/open") return void res.writeHead(200).write("x".repeat(500));
      res.writeHead(200);
      res.write("x".repeat(1000));
      res.end("x".repeat(1000));
    });
    try {
      await expect(guarded(`${server.url}/declared`)).rejects.toThrow("response of 2048 bytes is over the limit");
      const res = await guarded(`${server.url}/chunked`);
      expect(res.headers.get("transfer-encoding")).toBe("chunked");
      await expect(res.text()).rejects.toThrow("response is over the size limit");
      // A body the caller stops reading closes its connection, with nothing left unhandled.
      const cancelled = await guarded(`${server.url}/open`);
      const reader = cancelled.body!.getReader();
      expect((await reader.read()).value).toHaveLength(500);
      await reader.cancel();
    } finally {
      await server.close();
    }
  });

  it("answers a status line whose reason phrase holds control characters, without its reason", async () => {
    const raw = createNetServer((socket) => socket.once("data", () => socket.end(Buffer.from("HTTP/1.1 200 o\x7fk\x01\r\ncontent-length: 2\r\n\r\nhi", "latin1"))));
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    try {
      const res = await guarded(`http://127.0.0.1:${(raw.address() as AddressInfo).port}/`);
      expect([res.status, res.statusText, await res.text()]).toEqual([200, "", "hi"]);
    } finally {
      await new Promise((resolve) => raw.close(resolve));
    }
  });

  it("answers 204 with no body, and a server that hangs up as fetch failed", async () => {
    const server = await startRecorder((req, res) => (req.url === "/gone" ? void res.destroy() : void res.writeHead(204).end()));
    try {
      const res = await guarded(server.url);
      expect([res.status, res.body]).toEqual([204, null]);
      await expect(guarded(`${server.url}/gone`)).rejects.toThrow("fetch failed");
    } finally {
      await server.close();
    }
  });
});

it("an open skill still works through the shared guard", async () => {
  const mcp = await startOpenMcp();
  try {
    const skill = await createSkill(open, { mcpUrl: mcp.url });
    expect((skill.tools as Json[]).length).toBe(5);
  } finally {
    await mcp.close();
  }
});
