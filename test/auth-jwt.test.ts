// `jwt` auth mode end to end (SPEC §3): the real authenticator in front of the
// real server, tokens from a real oidc-provider client_credentials grant, and
// forged tokens signed with jose (the provider's own key or others). Every case
// asserts what a caller sees: HTTP status and the Connect error JSON.
import { createPublicKey, randomUUID, type JsonWebKey } from "node:crypto";
import { exportJWK, generateKeyPair, importJWK, SignJWT, type CryptoKey, type JWK, type JWTHeaderParameters, type JWTPayload } from "jose";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { LogCapture } from "./support/log-capture.js";
import { closedPort, startJwksServer, type JwksServer } from "./support/jwks-server.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

const AUD = "https://api.agentplane.test";
const TENANT = "acme";
const WRITER = { clientId: "writer", clientSecret: "writer-secret", scope: "platform:read platform:write" };
const READER = { clientId: "reader", clientSecret: "reader-secret", scope: "platform:read" };

// The AuthConfig every server here runs with, apart from issuer and JWKS.
const jwtAuth = (issuer: string, jwksUrl?: string) => ({
  mode: "jwt" as const,
  issuer,
  audience: AUD,
  algorithms: ["RS256", "ES256", "PS256"],
  clockToleranceSeconds: 60,
  ...(jwksUrl !== undefined && { jwksUrl }),
});

type SigningKey = Awaited<ReturnType<typeof importJWK>>;

let idp: TestIdp;
let server: TestServer;
// The provider's real signing key, and its public half as published at jwks_uri.
let idpKey: SigningKey;
let idpKid: string;
let idpPublicJwk: JWK;

const now = () => Math.floor(Date.now() / 1000);
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

// Claims of a well-formed access token for WRITER; `undefined` removes a claim.
function claims(overrides: Record<string, unknown> = {}): JWTPayload {
  const all: Record<string, unknown> = {
    iss: idp.issuer,
    aud: AUD,
    sub: WRITER.clientId,
    client_id: WRITER.clientId,
    scope: WRITER.scope,
    iat: now(),
    exp: now() + 300,
    ...overrides,
  };
  return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined));
}

// A token signed like the provider signs (RS256, its kid, `at+jwt`) unless overridden.
function forge(
  overrides: Record<string, unknown> = {},
  header: Partial<JWTHeaderParameters> = {},
  key: SigningKey | Uint8Array = idpKey,
): Promise<string> {
  return new SignJWT(claims(overrides)).setProtectedHeader({ alg: "RS256", kid: idpKid, typ: "at+jwt", ...header }).sign(key);
}

const listAgents = (headers: Record<string, string>, target: { url: string } = server) =>
  connectCall(target, "ListAgents", {}, headers);
const createAgent = (headers: Record<string, string>, name: string) =>
  connectCall(server, "CreateAgent", { agent: { name, model: PLACEHOLDER_MODEL } }, headers);

beforeAll(async () => {
  idp = await startIdp({
    clients: [WRITER, READER],
    scopes: ["platform:read", "platform:write"],
    audience: AUD,
    accessTokenFormat: "jwt",
  });
  const signing = idp.privateJwks.keys[0]!;
  idpKid = signing.kid!;
  idpKey = await importJWK(signing, "RS256");
  const published = (await (await fetch(idp.jwksUrl)).json()) as { keys: JWK[] };
  idpPublicJwk = published.keys.find((k) => k.kid === idpKid)!;
  // No jwksUrl: the JWKS is found through the issuer's discovery document.
  server = await startServer({ authenticator: createAuthenticator(jwtAuth(idp.issuer)) });
  await server.seedTenant(TENANT, [
    { subject: WRITER.clientId, role: "admin" },
    // An admin too, so that only its scope stands between it and a write.
    { subject: READER.clientId, role: "admin" },
  ]);
});

afterAll(async () => {
  await server?.close();
  await idp?.stop();
});

describe("valid tokens", () => {
  it("lists agents with a platform:read token from the identity provider", async () => {
    const token = await idp.token(READER.clientId, "platform:read");
    const res = await listAgents(bearer(token, TENANT));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
  });

  it("creates an agent with a platform:write token, and the agent is then listed", async () => {
    const token = await idp.token(WRITER.clientId, "platform:write");
    const created = await createAgent(bearer(token, TENANT), "triage");
    expect(created.status).toBe(200);
    expect(created.body.agent).toMatchObject({ id: expect.stringMatching(/^agt_/), tenant: TENANT, name: "triage" });

    const listed = await listAgents(bearer(token, TENANT));
    expect(listed.status).toBe(200);
    expect(listed.body.agents).toEqual([expect.objectContaining({ id: (created.body.agent as { id: string }).id, name: "triage" })]);
  });

  it("accepts a token forged with the provider's key and correct claims (baseline for the rejections below)", async () => {
    const res = await listAgents(bearer(await forge(), TENANT));
    expect(res.status).toBe(200);
  });
});

describe("Authorization header", () => {
  it.each([
    ["no Authorization header", {}, "missing bearer token"],
    ["a Basic credential", { authorization: "Basic eHl6Onh5eg==" }, "missing bearer token"],
    ["a malformed bearer token", { authorization: "Bearer abc" }, "token is malformed or invalid"],
  ])("answers 401 unauthenticated for %s", async (_case, auth, message) => {
    const res = await listAgents({ ...auth, "x-platform-tenant": TENANT });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message });
  });
});

describe("expiry and clock tolerance", () => {
  it("rejects a token that expired beyond the 60 s tolerance, saying so", async () => {
    const token = await forge({ iat: now() - 600, exp: now() - 120 });
    const res = await listAgents(bearer(token, TENANT));
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: expect.stringMatching(/expired/) });
  });

  it("still accepts a token that expired 30 s ago", async () => {
    const token = await forge({ iat: now() - 600, exp: now() - 30 });
    const res = await listAgents(bearer(token, TENANT));
    expect(res.status).toBe(200);
  });

  it("rejects a token without exp", async () => {
    const res = await listAgents(bearer(await forge({ exp: undefined }), TENANT));
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: expect.stringMatching(/"exp"/) });
  });
});

describe("issuer and audience", () => {
  it.each([
    ["the issuer with a trailing slash", (issuer: string) => `${issuer}/`],
    ["another issuer", () => "https://evil.example"],
    ["no issuer", () => undefined],
  ])("rejects %s", async (_case, iss) => {
    const res = await listAgents(bearer(await forge({ iss: iss(idp.issuer) }), TENANT));
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: expect.stringMatching(/"iss"/) });
  });

  it.each([
    ["another audience", "https://other.example"],
    ["the audience with a trailing slash", `${AUD}/`],
    ["no audience", undefined],
  ])("rejects %s", async (_case, aud) => {
    const res = await listAgents(bearer(await forge({ aud }), TENANT));
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: expect.stringMatching(/"aud"/) });
  });
});

describe("a misconfigured issuer or audience, told to the operator", () => {
  it("logs what was expected and what came at warn, once a minute per claim, without the token", async () => {
    const capture = new LogCapture();
    const logged = await startServer({ authenticator: createAuthenticator(jwtAuth(idp.issuer), { log: capture.logger }) });
    try {
      const wrongIss = await forge({ iss: "https://tenant.eu.auth0.example/" });
      for (let i = 0; i < 3; i++) expect((await listAgents(bearer(wrongIss, TENANT), logged)).status).toBe(401);
      const wrongAud = await forge({ aud: ["https://other.example", "https://second.example"] });
      expect((await listAgents(bearer(wrongAud, TENANT), logged)).status).toBe(401);
      const lines = capture.find("access token refused: a claim does not match this server's configuration");
      expect(lines.map(({ level, claim, expected, received }) => ({ level, claim, expected, received }))).toEqual([
        { level: 40, claim: "iss", expected: idp.issuer, received: "https://tenant.eu.auth0.example/" },
        { level: 40, claim: "aud", expected: [AUD], received: ["https://other.example", "https://second.example"] },
      ]);
      expect(capture.raw).not.toContain(wrongIss);
      expect(capture.raw).not.toContain(wrongAud);
    } finally {
      await logged.close();
    }
  });
});

describe("signature and algorithm", () => {
  it("rejects an unsecured token (alg none, empty signature)", async () => {
    const token = `${b64url({ alg: "none", typ: "JWT" })}.${b64url(claims())}.`;
    const res = await listAgents(bearer(token, TENANT));
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ code: "unauthenticated" });
  });

  it.each([
    ["SPKI PEM", () => createPublicKey({ key: idpPublicJwk as JsonWebKey, format: "jwk" }).export({ type: "spki", format: "pem" }) as string],
    ["JWK JSON", () => JSON.stringify(idpPublicJwk)],
  ])("rejects HS256 keyed with the provider's public key as %s (algorithm confusion)", async (_case, secret) => {
    const token = await forge({}, { alg: "HS256" }, new TextEncoder().encode(secret()));
    const res = await listAgents(bearer(token, TENANT));
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: "token signing algorithm is not allowed" });
  });

  it("rejects a token with an unknown kid signed by another RSA key as unauthenticated, not unavailable", async () => {
    const { privateKey } = await generateKeyPair("RS256");
    const token = await forge({}, { kid: "rogue-key" }, privateKey);
    const res = await listAgents(bearer(token, TENANT));
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: "token signing key is unknown" });
  });

  it("rejects a token carrying the provider's kid but signed by another key", async () => {
    const { privateKey } = await generateKeyPair("RS256");
    const res = await listAgents(bearer(await forge({}, {}, privateKey), TENANT));
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: "token signature is invalid" });
  });

  it("rejects a real token whose payload was altered", async () => {
    const [header, payload, signature] = (await idp.token(READER.clientId, "platform:read")).split(".");
    const widened = { ...(JSON.parse(Buffer.from(payload!, "base64url").toString()) as JWTPayload), scope: WRITER.scope };
    const res = await createAgent(bearer(`${header}.${b64url(widened)}.${signature}`, TENANT), "tampered");
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: "token signature is invalid" });
  });
});

describe("typ header", () => {
  it.each(["JWT", "at+jwt"])("accepts typ %s", async (typ) => {
    const res = await listAgents(bearer(await forge({}, { typ }), TENANT));
    expect(res.status).toBe(200);
  });

  it.each(["id_token+jwt", "secevent+jwt"])("rejects typ %s", async (typ) => {
    const res = await listAgents(bearer(await forge({}, { typ }), TENANT));
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: `token type "${typ}" is not an access token` });
  });
});

describe("scopes", () => {
  it("refuses CreateAgent to a platform:read token (tenant admin) with permission_denied naming platform:write", async () => {
    const token = await idp.token(READER.clientId, "platform:read");
    const res = await createAgent(bearer(token, TENANT), "not-allowed");
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ code: "permission_denied", message: expect.stringContaining("platform:write") });
  });
});

describe("key rotation", () => {
  const ISSUER = "https://issuer.rotation.test/";
  const SUBJECT = "rotator";
  let jwks: JwksServer;
  let rotating: TestServer;
  let keyA: RotatedKey;
  let keyB: RotatedKey;

  interface RotatedKey {
    kid: string;
    alg: string;
    key: CryptoKey;
    publicJwk: JWK;
  }
  async function newKey(kid: string, alg: string): Promise<RotatedKey> {
    const { privateKey, publicKey } = await generateKeyPair(alg);
    return { kid, alg, key: privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
  }

  const signWith = (k: RotatedKey) =>
    new SignJWT({ scope: "platform:read" })
      .setProtectedHeader({ alg: k.alg, kid: k.kid, typ: "at+jwt" })
      .setIssuer(ISSUER)
      .setAudience(AUD)
      .setSubject(SUBJECT)
      .setJti(randomUUID()) // RS256 is deterministic: without it a re-signed token could hit the token cache
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(k.key);

  beforeAll(async () => {
    keyA = await newKey("key-a", "RS256");
    keyB = await newKey("key-b", "ES256"); // rotation may change the algorithm too
    jwks = await startJwksServer([keyA.publicJwk]);
    rotating = await startServer({ authenticator: createAuthenticator(jwtAuth(ISSUER, jwks.url), { jwksCooldownMs: 0 }) });
    await rotating.seedTenant("rot", [{ subject: SUBJECT, role: "viewer" }]);
  });
  afterAll(async () => {
    await rotating?.close();
    await jwks?.close();
  });

  it("accepts a token signed by a key that appears in the JWKS later, without a restart", async () => {
    expect((await listAgents(bearer(await signWith(keyA), "rot"), rotating)).status).toBe(200);

    jwks.setKeys([keyB.publicJwk]);
    const fetchesBefore = jwks.requests();
    const res = await listAgents(bearer(await signWith(keyB), "rot"), rotating);
    expect(res.status).toBe(200);
    expect(jwks.requests()).toBeGreaterThan(fetchesBefore);

    // A fresh token (not the cached one) signed by the withdrawn key A.
    const withdrawn = await listAgents(bearer(await signWith(keyA), "rot"), rotating);
    expect(withdrawn.status).toBe(401);
    expect(withdrawn.body).toEqual({ code: "unauthenticated", message: "token signing key is unknown" });
  });

  it("tries each published key for a token without kid while old and new keys overlap", async () => {
    const old = await newKey("old", "RS256");
    const current = await newKey("current", "RS256");
    jwks.setKeys([old.publicJwk, current.publicJwk]);
    const withoutKid = (k: RotatedKey) =>
      new SignJWT({ scope: "platform:read" })
        .setProtectedHeader({ alg: "RS256", typ: "at+jwt" })
        .setIssuer(ISSUER)
        .setAudience(AUD)
        .setSubject(SUBJECT)
        .setJti(randomUUID())
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(k.key);
    expect((await listAgents(bearer(await withoutKid(current), "rot"), rotating)).status).toBe(200);
    expect((await listAgents(bearer(await withoutKid(old), "rot"), rotating)).status).toBe(200);
    const stranger = await newKey("stranger", "RS256");
    const refused = await listAgents(bearer(await withoutKid(stranger), "rot"), rotating);
    expect(refused).toMatchObject({ status: 401, body: { code: "unauthenticated", message: "token signature is invalid" } });
  });

  it("answers 401, not 503, for a typ header that is not a string", async () => {
    const odd = await new SignJWT({ scope: "platform:read" })
      .setProtectedHeader({ alg: keyB.alg, kid: keyB.kid, typ: 123 as unknown as string }) // a malformed header, on purpose
      .setIssuer(ISSUER)
      .setAudience(AUD)
      .setSubject(SUBJECT)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(keyB.key);
    jwks.setKeys([keyB.publicJwk]);
    const res = await listAgents(bearer(odd, "rot"), rotating);
    expect(res).toMatchObject({ status: 401, body: { code: "unauthenticated" } });
  });
});

describe("identity provider unavailable", () => {
  it("answers 503 unavailable, never 200, when the JWKS URL does not answer", async () => {
    const down = await startServer({
      authenticator: createAuthenticator(jwtAuth(idp.issuer, `http://127.0.0.1:${await closedPort()}/jwks`)),
    });
    try {
      await down.seedTenant(TENANT, [{ subject: WRITER.clientId, role: "admin" }]);
      const token = await idp.token(WRITER.clientId, "platform:read platform:write");
      for (let i = 0; i < 2; i++) {
        const res = await listAgents(bearer(token, TENANT), down);
        expect(res.status).toBe(503);
        expect(res.body).toEqual({ code: "unavailable", message: expect.stringMatching(/identity provider/) });
      }
    } finally {
      await down.close();
    }
  });

  it("answers 503 unavailable when the JWKS endpoint answers 500", async () => {
    const jwks = await startJwksServer([idpPublicJwk]);
    jwks.setFailure(500);
    const down = await startServer({ authenticator: createAuthenticator(jwtAuth(idp.issuer, jwks.url)) });
    try {
      await down.seedTenant(TENANT, [{ subject: WRITER.clientId, role: "admin" }]);
      const res = await listAgents(bearer(await forge(), TENANT), down);
      expect(res.status).toBe(503);
      expect(res.body).toEqual({ code: "unavailable", message: expect.stringMatching(/JWKS/) });
    } finally {
      await down.close();
      await jwks.close();
    }
  });

  it("answers 503 while discovery cannot reach the provider, and recovers once it is back", async () => {
    const discovering = await startServer({ authenticator: createAuthenticator(jwtAuth(idp.issuer)) });
    try {
      await discovering.seedTenant(TENANT, [{ subject: WRITER.clientId, role: "admin" }]);
      const token = await idp.token(WRITER.clientId, "platform:read");
      idp.setDown(true);
      try {
        const res = await listAgents(bearer(token, TENANT), discovering);
        expect(res.status).toBe(503);
        expect(res.body).toEqual({ code: "unavailable", message: expect.stringMatching(/identity provider/) });
      } finally {
        idp.setDown(false);
      }
      expect((await listAgents(bearer(token, TENANT), discovering)).status).toBe(200);
    } finally {
      await discovering.close();
    }
  });
});
