// Variant A (seed 5.4): opaque access tokens validated by RFC 7662
// introspection at a real oidc-provider, with the service authenticating to
// the introspection endpoint by HTTP Basic (SPEC 3).
import { randomBytes } from "node:crypto";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";

const AUD = "https://api.agentplane.test";
const SERVICE = { clientId: "agentplane-introspection", clientSecret: "service-secret-0123456789" };
const CALLER = { clientId: "ci-pipeline", clientSecret: "caller-secret-0123456789" };
const TENANT = "acme";

type CallResult = Awaited<ReturnType<typeof connectCall>>;

function expectError(res: CallResult, status: number, code: string, message?: RegExp): void {
  expect({ status: res.status, code: res.body.code }).toEqual({ status, code });
  if (message) expect(res.body.message).toMatch(message);
}

// What oidc-provider's opaque tokens look like (43 base64url characters), but
// never issued: the IdP answers `{"active": false}` for it.
const unknownToken = (): string => randomBytes(32).toString("base64url");

describe("introspection authentication (opaque tokens, RFC 7662)", () => {
  let idp: TestIdp;
  let server: TestServer;
  const extra: TestServer[] = [];

  const introspectionAuth = (
    overrides: { audience?: string; clientSecret?: string; cacheTtlSeconds?: number; negativeCacheTtlSeconds?: number } = {},
  ) =>
    createAuthenticator({
      mode: "introspection",
      url: idp.introspectionEndpoint,
      clientId: SERVICE.clientId,
      clientSecret: overrides.clientSecret ?? SERVICE.clientSecret,
      audience: overrides.audience ?? AUD,
      cacheTtlSeconds: overrides.cacheTtlSeconds ?? 60,
      negativeCacheTtlSeconds: overrides.negativeCacheTtlSeconds,
      timeoutMs: 2000,
    });

  // A further server on the same IdP, seeded like the main one.
  async function startExtra(overrides: Parameters<typeof introspectionAuth>[0]): Promise<TestServer> {
    const s = await startServer({ authenticator: introspectionAuth(overrides) });
    extra.push(s);
    await s.seedTenant(TENANT, [{ subject: CALLER.clientId, role: "admin" }]);
    return s;
  }

  const freshToken = () => idp.token(CALLER.clientId, "platform:read");
  const listAgents = (s: TestServer, token: string) => connectCall(s, "ListAgents", {}, bearer(token, TENANT));

  // Runs `fn` and returns how many introspection requests reached the IdP meanwhile.
  async function countIntrospections(fn: () => Promise<void>): Promise<number> {
    const before = idp.introspectionCalls();
    await fn();
    return idp.introspectionCalls() - before;
  }

  beforeAll(async () => {
    idp = await startIdp({
      accessTokenFormat: "opaque",
      audience: AUD,
      scopes: ["platform:read", "platform:write"],
      clients: [
        // The service's own credentials: it only calls the introspection endpoint.
        { ...SERVICE, scope: "platform:read" },
        { ...CALLER, scope: "platform:read platform:write" },
      ],
    });
    server = await startServer({ authenticator: introspectionAuth() });
    // Opaque tokens introspect without `sub`: the subject is the client_id.
    await server.seedTenant(TENANT, [{ subject: CALLER.clientId, role: "admin" }]);
  });

  afterAll(async () => {
    idp?.setDown(false);
    await Promise.all([server, ...extra].filter(Boolean).map((s) => s.close()));
    await idp?.stop();
  });

  it("accepts an active opaque token with platform:read and refuses an unknown one", async () => {
    const ok = await listAgents(server, await freshToken());
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({});

    expectError(await listAgents(server, "garbage"), 401, "unauthenticated", /not active/);
    expectError(await listAgents(server, unknownToken()), 401, "unauthenticated", /not active/);
  });

  it("introspects a token once for sequential requests (cache)", async () => {
    const token = await freshToken();
    const calls = await countIntrospections(async () => {
      for (let i = 0; i < 5; i++) expect((await listAgents(server, token)).status).toBe(200);
    });
    expect(calls).toBe(1);
  });

  it("introspects a token once for 20 concurrent requests (coalescing)", async () => {
    const token = await freshToken();
    const calls = await countIntrospections(async () => {
      const results = await Promise.all(Array.from({ length: 20 }, () => listAgents(server, token)));
      expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    });
    expect(calls).toBe(1);
  });

  it("refuses an active token issued for another audience", async () => {
    const other = await startExtra({ audience: "https://other.example" });
    expectError(await listAgents(other, await freshToken()), 401, "unauthenticated", /audience/);
  });

  it("refuses an inactive token and asks the IdP once within the negative TTL (1,000 requests)", async () => {
    // A TTL the requests cannot outlast on a loaded machine: the default's
    // few seconds passed during the 1,000 at load average 15.
    const longTtl = await startExtra({ negativeCacheTtlSeconds: 3600 });
    const token = unknownToken();
    const calls = await countIntrospections(async () => {
      for (let batch = 0; batch < 10; batch++) {
        const results = await Promise.all(Array.from({ length: 100 }, () => listAgents(longTtl, token)));
        for (const res of results) expectError(res, 401, "unauthenticated", /not active/);
      }
    });
    expect(calls).toBe(1);
  });

  it("never caches a refusal when the negative TTL is 0", async () => {
    const noNegative = await startExtra({ negativeCacheTtlSeconds: 0 });
    const token = unknownToken();
    const calls = await countIntrospections(async () => {
      for (let i = 0; i < 3; i++) expectError(await listAgents(noNegative, token), 401, "unauthenticated");
    });
    expect(calls).toBe(3);
  });

  it("answers 503 unavailable, never 200, while the IdP is down, and recovers", async () => {
    const token = await freshToken();
    idp.setDown(true);
    try {
      const results = [await listAgents(server, token), await listAgents(server, token)];
      for (const res of results) expectError(res, 503, "unavailable", /introspection/);
    } finally {
      idp.setDown(false);
    }
    const calls = await countIntrospections(async () => {
      expect((await listAgents(server, token)).status).toBe(200);
    });
    expect(calls).toBe(1); // the failure was not cached either way
  });

  it("answers 503 unavailable when the IdP refuses the service's own credentials", async () => {
    const misconfigured = await startExtra({ clientSecret: "not-the-secret" });
    const token = await freshToken();
    // The token itself is fine (the main server accepts it).
    expect((await listAgents(server, token)).status).toBe(200);
    expectError(await listAgents(misconfigured, token), 503, "unavailable", /HTTP 401/);
  });

  it("introspects again once the cache TTL has passed", async () => {
    const shortTtl = await startExtra({ cacheTtlSeconds: 1 });
    const token = await freshToken();
    const first = await countIntrospections(async () => {
      expect((await listAgents(shortTtl, token)).status).toBe(200);
      expect((await listAgents(shortTtl, token)).status).toBe(200);
    });
    expect(first).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const again = await countIntrospections(async () => {
      expect((await listAgents(shortTtl, token)).status).toBe(200);
    });
    expect(again).toBe(1);
  });
});
