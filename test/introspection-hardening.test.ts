// Introspection under attack and against odd identity providers: what the
// caller sees through the real server, and how often the IdP is asked. The
// IdP here is a scripted loopback endpoint (test/support/scripted-introspection.ts).
import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import pino from "pino";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import type { IntrospectionOptions } from "../src/integrations/identity/introspection.js";
import { NO_OBSERVER, type Observer } from "../src/lib/observer.js";
import { startScriptedIdp, type ScriptedAnswer, type ScriptedIdp } from "./support/scripted-introspection.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

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

  async function serverWith(overrides: Partial<IntrospectionOptions> = {}, mcpResource?: string, observer?: Observer): Promise<TestServer> {
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
      { log: logger, mcpResource, observer },
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
      // A refusal kept for an hour: on a loaded machine the 1,000 requests
      // may take longer than the usual 10 s.
      const longTtl = await serverWith({ negativeCacheTtlSeconds: 3600 });
      const token = randomToken();
      const calls = await countCalls(async () => {
        for (let batch = 0; batch < 10; batch++) {
          const results = await Promise.all(Array.from({ length: 100 }, () => listAgents(longTtl, token)));
          for (const res of results) expectError(res, 401, "unauthenticated", /not active/);
        }
      });
      expect(calls).toBe(1);
    });

    it("asks again once the negative TTL has passed, and the token may have become valid", async () => {
      // 2 s: both requests below fit in it on a loaded machine.
      const shortTtl = await serverWith({ negativeCacheTtlSeconds: 2 });
      const token = randomToken();
      expectError(await listAgents(shortTtl, token), 401, "unauthenticated");
      idp.script(() => activeAnswer());
      expectError(await listAgents(shortTtl, token), 401, "unauthenticated");
      expect(idp.calls()).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 2100));
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
      const bounded = await serverWith({ cacheMaxEntries: 20, negativeCacheTtlSeconds: 3600 });
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
      // No wait for a slot may time out, however slowly a loaded machine
      // gets through the 200.
      const patient = await serverWith({ timeoutMs: 60_000 });
      idp.script(() => ({ body: { active: false }, delayMs: 100 }));
      const results = await Promise.all(Array.from({ length: 200 }, () => listAgents(patient, randomToken())));
      for (const res of results) expectError(res, 401, "unauthenticated");
      expect(idp.calls()).toBe(200);
      expect(idp.maxInFlight()).toBeLessThanOrEqual(32);
      expect(idp.maxInFlight()).toBeGreaterThan(1);
    });

    it("answers 503 at once when the wait queue is full", async () => {
      // The IdP holds its answers until the test lets them go, so the two
      // slots stay taken and three wait however the ten requests are spread
      // in time; no wait times out before then.
      const small = await serverWith({ maxConcurrent: 2, maxQueued: 3, timeoutMs: 60_000 });
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      idp.script(async () => {
        await held;
        return { body: { active: false } };
      });
      const refused: CallResult[] = [];
      const pending = Array.from({ length: 10 }, async () => {
        const res = await listAgents(small, randomToken());
        if (res.status === 503) refused.push(res);
        return res;
      });
      // The refusals come back while the IdP still holds every answer: they
      // never waited for one.
      await waitFor("five refusals and two look-ups at the IdP", 30_000, () => (refused.length >= 5 && idp.calls() >= 2 ? true : undefined), 5);
      expect(idp.calls()).toBe(2);
      release();
      const results = await Promise.all(pending);
      const answered = results.filter((r) => r.status === 401);
      expect({ refused: refused.length, answered: answered.length }).toEqual({ refused: 5, answered: 5 });
      for (const r of refused) expectError(r, 503, "unavailable", /introspection.*(busy|waiting)/);
      expect(idp.calls()).toBe(5);
      expect(idp.maxInFlight()).toBeLessThanOrEqual(2);
    });

    it("answers 503 to a look-up that waits for a slot longer than the timeout", async () => {
      // One slot and a 2 s timeout (the IdP's answer and the wait for a
      // slot alike). A takes the slot and the IdP never answers it, so A's
      // look-up times out at 2 s; B waits behind it, D behind B. When A's
      // slot passes to B, D has waited less than 2 s, and B's answer is held
      // until D's wait has timed out: D waited 2 s for the one slot while A
      // and B each stayed within their own 2 s. Waits are entered in order,
      // each once the one before it is in the gate (a token-cache miss).
      let entered = 0;
      const slow = await serverWith({ maxConcurrent: 1, maxQueued: 10, timeoutMs: 2000 }, undefined, {
        ...NO_OBSERVER,
        tokenCache: (result) => void (result === "miss" && entered++),
      });
      let releaseB!: () => void;
      const heldB = new Promise<void>((resolve) => (releaseB = resolve));
      const never = new Promise<never>(() => {});
      const [a, b, d] = [randomToken(), randomToken(), randomToken()];
      idp.script(async (token) => {
        if (token === a) return never;
        await heldB;
        return { body: { active: false } };
      });
      const inGate = (n: number) => waitFor(`${n} look-ups in the gate`, 10_000, () => (entered >= n ? true : undefined), 1);
      const first = listAgents(slow, a);
      await waitFor("A at the IdP", 10_000, () => (idp.calls() === 1 ? true : undefined), 1);
      const second = listAgents(slow, b);
      await inGate(2);
      const last = listAgents(slow, d);
      await inGate(3);
      const waited = await last;
      releaseB();
      expectError(waited, 503, "unavailable", /introspection is busy.*waited 2000 ms/);
      expectError(await first, 503, "unavailable", /introspection failed/);
      expectError(await second, 401, "unauthenticated");
      expect(idp.calls()).toBe(2);
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
