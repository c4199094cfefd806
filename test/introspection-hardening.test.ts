// Introspection under attack and against odd identity providers: what the
// caller sees through the real server, and how often the IdP is asked. The
// IdP here is a scripted loopback endpoint (test/support/scripted-introspection.ts).
import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import pino from "pino";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import type { IntrospectionOptions } from "../src/integrations/identity/introspection.js";
import { startScriptedIdp, type ScriptedAnswer, type ScriptedIdp } from "./support/scripted-introspection.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";

const TENANT = "acme";
const SUBJECT = "ci-pipeline";
const SERVICE_SECRET = "service-secret-0123456789";
const AUD = "https://api.agentplane.test";

type CallResult = Awaited<ReturnType<typeof connectCall>>;

function expectError(res: CallResult, status: number, code: string, message?: RegExp): void {
  expect({ status: res.status, code: res.body.code }).toEqual({ status, code });
  if (message) expect(res.body.message).toMatch(message);
}

const randomToken = (): string => randomBytes(32).toString("base64url");
const now = () => Math.floor(Date.now() / 1000);
// What an IdP answers for a good access token of SUBJECT.
const activeAnswer = (extra: Record<string, unknown> = {}): ScriptedAnswer => ({
  body: { active: true, client_id: SUBJECT, scope: "platform:read", aud: [AUD], exp: now() + 300, iat: now(), token_type: "Bearer", ...extra },
});

describe("introspection hardening (scripted IdP)", () => {
  let idp: ScriptedIdp;
  const servers: TestServer[] = [];
  const logLines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "info" },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        logLines.push(JSON.parse(chunk.toString("utf8")) as Record<string, unknown>);
        done();
      },
    }),
  );

  async function serverWith(overrides: Partial<IntrospectionOptions> = {}, mcpResource?: string): Promise<TestServer> {
    const authenticator = createAuthenticator(
      {
        mode: "introspection",
        url: idp.url,
        clientId: "agentplane",
        clientSecret: SERVICE_SECRET,
        audience: AUD,
        cacheTtlSeconds: 60,
        negativeCacheTtlSeconds: 10,
        timeoutMs: 2000,
        clockToleranceSeconds: 60,
        maxConcurrent: 32,
        maxQueued: 256,
        ...overrides,
      },
      { log: logger, mcpResource },
    );
    const s = await startServer({ authenticator });
    servers.push(s);
    await s.seedTenant(TENANT, [{ subject: SUBJECT, role: "admin" }]);
    return s;
  }

  const listAgents = (s: TestServer, token: string) => connectCall(s, "ListAgents", {}, bearer(token, TENANT));

  // Runs `fn` and returns how many introspection requests reached the IdP meanwhile.
  async function countCalls(fn: () => Promise<void>): Promise<number> {
    const before = idp.calls();
    await fn();
    return idp.calls() - before;
  }

  let server: TestServer;

  beforeAll(async () => {
    idp = await startScriptedIdp();
    server = await serverWith();
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await idp?.stop();
  });

  beforeEach(() => {
    idp.script(() => ({ body: { active: false } }));
    idp.reset();
    logLines.length = 0;
  });

  describe("negative answers are cached briefly, in bounded memory", () => {
    it("asks the IdP once for 1,000 requests with the same inactive token", async () => {
      const token = randomToken();
      const calls = await countCalls(async () => {
        for (let batch = 0; batch < 10; batch++) {
          const results = await Promise.all(Array.from({ length: 100 }, () => listAgents(server, token)));
          for (const res of results) expectError(res, 401, "unauthenticated", /not active/);
        }
      });
      expect(calls).toBe(1);
    });

    it("asks again once the negative TTL has passed, and the token may have become valid", async () => {
      const shortTtl = await serverWith({ negativeCacheTtlSeconds: 1 });
      const token = randomToken();
      expectError(await listAgents(shortTtl, token), 401, "unauthenticated");
      idp.script(() => activeAnswer());
      expectError(await listAgents(shortTtl, token), 401, "unauthenticated");
      expect(idp.calls()).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect((await listAgents(shortTtl, token)).status).toBe(200);
      expect(idp.calls()).toBe(2);
    });

    it("never caches a refusal with a negative TTL of 0", async () => {
      const noNegative = await serverWith({ negativeCacheTtlSeconds: 0 });
      const token = randomToken();
      const calls = await countCalls(async () => {
        for (let i = 0; i < 3; i++) expectError(await listAgents(noNegative, token), 401, "unauthenticated");
      });
      expect(calls).toBe(3);
    });

    it("forgets the oldest refusals past the cache bound, and random tokens never evict a valid one", async () => {
      const bounded = await serverWith({ cacheMaxEntries: 20 });
      const good = randomToken();
      idp.script((token) => (token === good ? activeAnswer() : { body: { active: false } }));
      expect((await listAgents(bounded, good)).status).toBe(200);
      const flood = Array.from({ length: 50 }, randomToken);
      for (const token of flood) expectError(await listAgents(bounded, token), 401, "unauthenticated");
      idp.reset();
      // The newest refusal is still known, the oldest was dropped.
      expectError(await listAgents(bounded, flood[49]!), 401, "unauthenticated");
      expect(idp.calls()).toBe(0);
      expectError(await listAgents(bounded, flood[0]!), 401, "unauthenticated");
      expect(idp.calls()).toBe(1);
      // The valid token's cache entry survived the flood.
      expect((await listAgents(bounded, good)).status).toBe(200);
      expect(idp.calls()).toBe(1);
    });

    it("never caches an IdP failure (503)", async () => {
      idp.script(() => ({ status: 502, body: "bad gateway" }));
      const token = randomToken();
      expectError(await listAgents(server, token), 503, "unavailable");
      idp.script(() => activeAnswer());
      expect((await listAgents(server, token)).status).toBe(200);
      expect(idp.calls()).toBe(2);
    });
  });

  describe("concurrent introspections are bounded", () => {
    it("never has more than the cap in flight at the IdP for 200 distinct tokens", async () => {
      idp.script(() => ({ body: { active: false }, delayMs: 100 }));
      const results = await Promise.all(Array.from({ length: 200 }, () => listAgents(server, randomToken())));
      for (const res of results) expectError(res, 401, "unauthenticated");
      expect(idp.calls()).toBe(200);
      expect(idp.maxInFlight()).toBeLessThanOrEqual(32);
      expect(idp.maxInFlight()).toBeGreaterThan(1);
    });

    it("answers 503 quickly when the wait queue is full", async () => {
      const small = await serverWith({ maxConcurrent: 2, maxQueued: 3 });
      idp.script(() => ({ body: { active: false }, delayMs: 400 }));
      const timed = Array.from({ length: 10 }, async () => {
        const started = Date.now();
        const res = await listAgents(small, randomToken());
        return { res, ms: Date.now() - started };
      });
      const results = await Promise.all(timed);
      const refused = results.filter((r) => r.res.status === 503);
      const answered = results.filter((r) => r.res.status === 401);
      expect({ refused: refused.length, answered: answered.length }).toEqual({ refused: 5, answered: 5 });
      for (const r of refused) {
        expectError(r.res, 503, "unavailable", /introspection.*(busy|waiting)/);
        expect(r.ms).toBeLessThan(300); // never waited for an IdP answer
      }
      expect(idp.calls()).toBe(5);
      expect(idp.maxInFlight()).toBeLessThanOrEqual(2);
    });

    it("answers 503 to a look-up that waits for a slot longer than the timeout", async () => {
      const slow = await serverWith({ maxConcurrent: 1, maxQueued: 10, timeoutMs: 1000 });
      idp.script(() => ({ body: { active: false }, delayMs: 400 }));
      // Slots free at 400, 800, 1200 ms: the fourth would wait past 1000 ms.
      const results = await Promise.all(Array.from({ length: 4 }, () => listAgents(slow, randomToken())));
      expect(results.map((r) => r.status).sort()).toEqual([401, 401, 401, 503]);
      expectError(results.find((r) => r.status === 503)!, 503, "unavailable", /introspection is busy.*waited 1000 ms/);
      expect(idp.calls()).toBe(3);
    });

    it("still coalesces concurrent requests with one token into one introspection", async () => {
      idp.script(() => ({ ...activeAnswer(), delayMs: 100 }));
      const token = randomToken();
      const results = await Promise.all(Array.from({ length: 50 }, () => listAgents(server, token)));
      expect(results.map((r) => r.status)).toEqual(Array(50).fill(200));
      expect(idp.calls()).toBe(1);
    });
  });

  describe("claims are checked as RFC 7662 defines them", () => {
    it("refuses a token whose nbf is in the future beyond the clock tolerance", async () => {
      idp.script(() => activeAnswer({ nbf: now() + 600 }));
      expectError(await listAgents(server, randomToken()), 401, "unauthenticated", /not valid before|nbf/);
    });

    it("accepts a token whose nbf is within the clock tolerance", async () => {
      idp.script(() => activeAnswer({ nbf: now() + 30 }));
      expect((await listAgents(server, randomToken())).status).toBe(200);
    });

    it.each([
      ["a string exp", { exp: String(now() + 300) }, /exp/],
      ["a boolean exp", { exp: true }, /exp/],
      ["a string nbf", { nbf: "0" }, /nbf/],
      ["a string iat", { iat: String(now()) }, /iat/],
      ["an exp in the past", { exp: now() - 5 }, /expired/],
      ["active as the string \"true\"", { active: "true" }, /not active/],
      ["active as 1", { active: 1 }, /not active/],
      ["a refresh token that says token_use access but token_type refresh", { token_use: "access_token", token_type: "refresh_token" }, /refresh/],
      ["a Keycloak refresh token (typ Refresh)", { typ: "Refresh" }, /refresh/],
      ["aud as a number", { aud: 42 }, /audience/],
      ["aud naming another service", { aud: "https://other.example" }, /audience/],
      ["a non-string sub next to a member's client_id", { sub: 42 }, /sub/],
      ["an empty sub next to a member's client_id", { sub: "" }, /sub/],
    ])("refuses %s with 401", async (_name, claims, message) => {
      idp.script(() => activeAnswer(claims));
      expectError(await listAgents(server, randomToken()), 401, "unauthenticated", message);
    });

    it("accepts a token for the MCP resource (RFC 8707) on /mcp only", async () => {
      const mcpResource = "https://agentplane.test/mcp";
      const s = await serverWith({}, mcpResource);
      idp.script(() => activeAnswer({ aud: [mcpResource], scope: "platform:read mcp:platform.read" }));
      const mcp = await fetch(`${s.url}/mcp?tenant=${TENANT}`, {
        method: "POST",
        headers: { ...bearer(randomToken()), "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
      });
      expect(mcp.status).toBe(200);
      expect(((await mcp.json()) as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name)).toContain("list_agents");
      expectError(await listAgents(s, randomToken()), 401, "unauthenticated", /MCP endpoint/);
      // A token for both is a token for the API too.
      idp.script(() => activeAnswer({ aud: [mcpResource, AUD] }));
      expect((await listAgents(s, randomToken())).status).toBe(200);
    });

    it("accepts aud as a single string", async () => {
      idp.script(() => activeAnswer({ aud: AUD }));
      expect((await listAgents(server, randomToken())).status).toBe(200);
    });
  });

  describe("IdP error answers map to what the caller can do about them", () => {
    it.each([
      ["400 unsupported_token_type", 400, { error: "unsupported_token_type" }],
      ["400 invalid_request", 400, { error: "invalid_request", error_description: "token is malformed" }],
      ["400 without a body", 400, ""],
      ["413 (the token is too large for the IdP)", 413, ""],
    ])("answers 401 unauthenticated to %s, and caches it briefly", async (_name, status, body) => {
      idp.script(() => ({ status, body }));
      const token = randomToken();
      expectError(await listAgents(server, token), 401, "unauthenticated", /identity provider/);
      expectError(await listAgents(server, token), 401, "unauthenticated");
      expect(idp.calls()).toBe(1);
    });

    it.each([
      ["401", 401, { error: "invalid_client" }],
      ["403", 403, ""],
      ["400 invalid_client", 400, { error: "invalid_client" }],
      ["404 (wrong introspection URL)", 404, ""],
    ])("answers 503 and logs an error for the operator when the IdP refuses the service: %s", async (_name, status, body) => {
      idp.script(() => ({ status, body }));
      const token = randomToken();
      expectError(await listAgents(server, token), 503, "unavailable", /introspection/);
      expectError(await listAgents(server, token), 503, "unavailable");
      expect(idp.calls()).toBe(2); // not cached: fixing the configuration must take effect at once
      const errors = logLines.filter((l) => l.level === 50);
      expect(errors.length).toBeGreaterThanOrEqual(1);
      expect(String(errors[0]!.msg)).toMatch(new RegExp(`introspection.*HTTP ${status}`));
      const logged = JSON.stringify(logLines);
      expect(logged).not.toContain(SERVICE_SECRET);
      expect(logged).not.toContain(token);
    });

    it.each([
      ["500", { status: 500, body: "oops" }],
      ["503", { status: 503, body: "" }],
      ["429", { status: 429, body: "" }],
      ["a body that is not JSON", { body: "<html>" }],
      ["a JSON array", { body: "[]" }],
      ["JSON null", { body: "null" }],
      ["an answer slower than the timeout", { ...activeAnswer(), delayMs: 2500 }],
    ])("answers 503 unavailable to %s", async (_name, answer) => {
      idp.script(() => answer as ScriptedAnswer);
      expectError(await listAgents(server, randomToken()), 503, "unavailable", /introspection/);
    });

    it("answers 503 to an answer larger than 64 KiB, with or without Content-Length", async () => {
      const huge = { ...activeAnswer().body as object, padding: "x".repeat(100 * 1024) };
      idp.script(() => ({ body: huge }));
      expectError(await listAgents(server, randomToken()), 503, "unavailable", /65536 bytes/);
      idp.script(() => ({ body: huge, headers: { "transfer-encoding": "chunked" } }));
      expectError(await listAgents(server, randomToken()), 503, "unavailable", /65536 bytes/);
    });

    it("does not follow a redirect with the token", async () => {
      idp.script(() => ({ status: 307, headers: { location: "/elsewhere" }, body: "" }));
      expectError(await listAgents(server, randomToken()), 503, "unavailable", /redirect/);
      expect(idp.calls()).toBe(1);
    });
  });
});
