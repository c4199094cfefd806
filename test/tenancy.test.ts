// Tenant authorization (SPEC 3, seed 5.3-5.4): the tenant control plane
// (Member rows for the token's subject in the selected tenant), scopes, the
// platform:admin bootstrap, and the alternative claim mode.
import { SignJWT, importJWK } from "jose";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

const AUD = "https://api.agentplane.test";
const SCOPES = ["platform:read", "platform:write", "platform:admin"];
// Client credentials tokens: the subject is the client_id.
const ACME_ADMIN = "acme-admin";
const ACME_VIEWER = "acme-viewer";
const GLOBEX_MEMBER = "globex-member";
const PLATFORM_ADMIN = "platform-operator";

type HeaderMap = Record<string, string>;
type CallResult = { status: number; body: Record<string, unknown> };

function expectError(res: CallResult, status: number, code: string, message?: RegExp): void {
  expect({ status: res.status, code: res.body.code }).toEqual({ status, code });
  if (message) expect(res.body.message).toMatch(message);
}

// The REST mirror, as curl would call it.
async function restGet(server: TestServer, path: string, headers: HeaderMap): Promise<CallResult> {
  const res = await fetch(`${server.url}${path}`, { headers });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const agent = (name: string) => ({ agent: { name, model: PLACEHOLDER_MODEL } });

describe("tenant authorization", () => {
  let idp: TestIdp;
  let server: TestServer;
  const tokens = new Map<string, string>();

  const jwtAuth = () =>
    createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 });

  // A real token from the IdP for `clientId` with exactly `scope`.
  async function token(clientId: string, scope: string): Promise<string> {
    const key = `${clientId} ${scope}`;
    let t = tokens.get(key);
    if (t === undefined) {
      t = await idp.token(clientId, scope);
      tokens.set(key, t);
    }
    return t;
  }

  beforeAll(async () => {
    idp = await startIdp({
      accessTokenFormat: "jwt",
      audience: AUD,
      scopes: SCOPES,
      clients: [ACME_ADMIN, ACME_VIEWER, GLOBEX_MEMBER, PLATFORM_ADMIN].map((clientId) => ({
        clientId,
        clientSecret: `${clientId}-secret-0123456789`,
        scope: SCOPES.join(" "),
      })),
    });
    server = await startServer({ authenticator: jwtAuth() });
    await server.seedTenant("acme", [
      { subject: ACME_ADMIN, role: "admin" },
      { subject: ACME_VIEWER, role: "viewer" },
    ]);
    await server.seedTenant("globex", [{ subject: GLOBEX_MEMBER, role: "admin" }]);
  });

  afterAll(async () => {
    await server?.close();
    await idp?.stop();
  });

  describe("roles and scopes", () => {
    it("lets a viewer read but not write, whatever its scope", async () => {
      const t = await token(ACME_VIEWER, "platform:read platform:write");
      expect((await connectCall(server, "ListAgents", {}, bearer(t, "acme"))).status).toBe(200);
      const res = await connectCall(server, "CreateAgent", agent("nope"), bearer(t, "acme"));
      expectError(res, 403, "permission_denied", /CreateAgent needs the admin role in tenant "acme"/);
    });

    it("refuses a write by an admin whose token lacks platform:write", async () => {
      const t = await token(ACME_ADMIN, "platform:read");
      const res = await connectCall(server, "CreateAgent", agent("nope"), bearer(t, "acme"));
      expectError(res, 403, "permission_denied", /missing scope: CreateAgent needs platform:write/);
    });
  });

  describe("tenant selection", () => {
    it("denies a non-member exactly as it denies a tenant that does not exist", async () => {
      const t = await token(GLOBEX_MEMBER, "platform:read");
      const existing = await connectCall(server, "ListAgents", {}, bearer(t, "acme"));
      const missing = await connectCall(server, "ListAgents", {}, bearer(t, "nosuch"));
      expectError(existing, 403, "permission_denied", /not a member of tenant "acme"/);
      expect(missing.status).toBe(existing.status);
      expect(JSON.stringify(missing.body).replaceAll("nosuch", "acme")).toBe(JSON.stringify(existing.body));
    });

    it("requires X-Platform-Tenant", async () => {
      const res = await connectCall(server, "ListAgents", {}, bearer(await token(ACME_ADMIN, "platform:read")));
      expectError(res, 400, "invalid_argument", /^X-Platform-Tenant: /);
    });

    it.each(["X-Org-ID", "X-Organization-ID"])("rejects the organization header %s", async (header) => {
      const headers = { ...bearer(await token(ACME_ADMIN, "platform:read"), "acme"), [header]: "acme" };
      const res = await connectCall(server, "ListAgents", {}, headers);
      expectError(res, 400, "invalid_argument", new RegExp(`^${header}: `));
    });
  });

  describe("cross-tenant access by id", () => {
    let agentId: string;

    beforeAll(async () => {
      const t = await token(ACME_ADMIN, "platform:write");
      const res = await connectCall(server, "CreateAgent", agent("acme-only"), bearer(t, "acme"));
      expect(res.status).toBe(200);
      agentId = (res.body.agent as { id: string }).id;
      expect(agentId).toMatch(/^agt_/);
    });

    it("hides an acme agent from a globex member in globex (Connect)", async () => {
      const t = await token(GLOBEX_MEMBER, "platform:read");
      const res = await connectCall(server, "GetAgent", { id: agentId }, bearer(t, "globex"));
      expectError(res, 404, "not_found", new RegExp(agentId));

      const own = await connectCall(server, "GetAgent", { id: agentId }, bearer(await token(ACME_ADMIN, "platform:read"), "acme"));
      expect(own.status).toBe(200);
      expect(own.body.agent).toMatchObject({ id: agentId, tenant: "acme", name: "acme-only" });
    });

    it("gives the same answers over REST, in the Connect error shape", async () => {
      const admin = await token(ACME_ADMIN, "platform:read");
      const globex = await token(GLOBEX_MEMBER, "platform:read");
      const cases: { path: string; headers: HeaderMap; connect: [string, object] }[] = [
        { path: "/api/v1/agents", headers: bearer(admin, "acme"), connect: ["ListAgents", {}] },
        { path: "/api/v1/agents", headers: bearer(globex, "acme"), connect: ["ListAgents", {}] },
        { path: "/api/v1/agents", headers: bearer(globex, "nosuch"), connect: ["ListAgents", {}] },
        { path: "/api/v1/agents", headers: bearer(admin), connect: ["ListAgents", {}] },
        { path: "/api/v1/agents", headers: { ...bearer(admin, "acme"), "X-Org-ID": "acme" }, connect: ["ListAgents", {}] },
        { path: `/api/v1/agents/${agentId}`, headers: bearer(admin, "acme"), connect: ["GetAgent", { id: agentId }] },
        { path: `/api/v1/agents/${agentId}`, headers: bearer(globex, "globex"), connect: ["GetAgent", { id: agentId }] },
      ];
      const statuses: number[] = [];
      for (const c of cases) {
        const rest = await restGet(server, c.path, c.headers);
        const rpc = await connectCall(server, c.connect[0], c.connect[1], c.headers);
        expect({ path: c.path, status: rest.status }).toEqual({ path: c.path, status: rpc.status });
        if (rest.status !== 200) {
          expect(Object.keys(rest.body).sort()).toEqual(["code", "message"]);
          expect(rest.body).toEqual(rpc.body);
        }
        statuses.push(rest.status);
      }
      expect(statuses).toEqual([200, 403, 403, 400, 400, 200, 404]);
    });
  });

  describe("platform admin", () => {
    it("creates a tenant without a tenant header; platform:write alone may not", async () => {
      const admin = await token(PLATFORM_ADMIN, "platform:admin");
      const res = await connectCall(server, "CreateTenant", { tenant: { slug: "initech", displayName: "Initech" } }, bearer(admin));
      expect(res.status).toBe(200);
      expect(res.body.tenant).toMatchObject({ slug: "initech", displayName: "Initech" });

      const writer = await token(ACME_ADMIN, "platform:read platform:write");
      const denied = await connectCall(server, "CreateTenant", { tenant: { slug: "hooli" } }, bearer(writer));
      expectError(denied, 403, "permission_denied", /CreateTenant needs platform:admin/);
    });

    it("lists every tenant", async () => {
      const res = await connectCall(server, "ListTenants", {}, bearer(await token(PLATFORM_ADMIN, "platform:admin")));
      expect(res.status).toBe(200);
      const slugs = (res.body.tenants as { slug: string }[]).map((t) => t.slug);
      expect(slugs).toEqual(expect.arrayContaining(["acme", "globex"]));
      expect(slugs).not.toContain("hooli");
    });

    it("adds a member to a tenant it is not a member of (bootstrap), who can then read", async () => {
      const slug = "umbrella";
      const admin = await token(PLATFORM_ADMIN, "platform:admin");
      expect((await connectCall(server, "CreateTenant", { tenant: { slug } }, bearer(admin))).status).toBe(200);
      const reader = await token(GLOBEX_MEMBER, "platform:read");
      expectError(await connectCall(server, "ListAgents", {}, bearer(reader, slug)), 403, "permission_denied");

      const added = await connectCall(
        server,
        "AddMember",
        { member: { subject: GLOBEX_MEMBER, role: "ROLE_VIEWER" } },
        bearer(admin, slug),
      );
      expect(added.status).toBe(200);
      expect(added.body.member).toMatchObject({ tenant: slug, subject: GLOBEX_MEMBER, role: "ROLE_VIEWER" });
      expect((await connectCall(server, "ListAgents", {}, bearer(reader, slug))).status).toBe(200);
    });
  });

  describe("claim mode (tenantClaim: org_id)", () => {
    let claimServer: TestServer;

    // A token signed with the IdP's real key, carrying an Auth0-style org_id.
    async function forge(claims: { scope: string; org_id: string; client_id?: string }): Promise<string> {
      const jwk = idp.privateJwks.keys[0]!;
      const key = await importJWK(jwk, "RS256");
      const clientId = claims.client_id ?? "claim-client";
      return new SignJWT({ ...claims, client_id: clientId })
        .setProtectedHeader({ alg: "RS256", typ: "at+jwt", ...(jwk.kid ? { kid: jwk.kid } : {}) })
        .setIssuer(idp.issuer)
        .setAudience(AUD)
        .setSubject(clientId)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(key);
    }

    beforeAll(async () => {
      claimServer = await startServer({ authenticator: jwtAuth(), tenantClaim: "org_id" });
      await claimServer.seedTenant("acme"); // no Member rows at all
      await claimServer.seedTenant("globex");
    });
    afterAll(async () => {
      await claimServer?.close();
    });

    it("admits a token whose org_id is the selected slug, without a Member row", async () => {
      const reader = await forge({ scope: "platform:read", org_id: "acme" });
      expect((await connectCall(claimServer, "ListAgents", {}, bearer(reader, "acme"))).status).toBe(200);

      const writer = await forge({ scope: "platform:write", org_id: "acme" });
      const created = await connectCall(claimServer, "CreateAgent", agent("by-claim"), bearer(writer, "acme"));
      expect(created.status).toBe(200);
      expect(created.body.agent).toMatchObject({ tenant: "acme", name: "by-claim" });
    });

    it("refuses a token whose org_id is another tenant, as for a missing tenant", async () => {
      const t = await forge({ scope: "platform:read platform:write", org_id: "globex" });
      const other = await connectCall(claimServer, "ListAgents", {}, bearer(t, "acme"));
      expectError(other, 403, "permission_denied", /not a member of tenant "acme"/);
      const missing = await connectCall(claimServer, "ListAgents", {}, bearer(t, "nosuch"));
      expect(missing.status).toBe(other.status);
      expect(JSON.stringify(missing.body).replaceAll("nosuch", "acme")).toBe(JSON.stringify(other.body));
    });

    it("ignores X-Org-ID instead of rejecting it, and never authorizes by it", async () => {
      const acme = await forge({ scope: "platform:read", org_id: "acme" });
      const ignored = await connectCall(claimServer, "ListAgents", {}, { ...bearer(acme, "acme"), "X-Org-ID": "globex" });
      expect(ignored.status).toBe(200);

      const globex = await forge({ scope: "platform:read", org_id: "globex" });
      const res = await connectCall(claimServer, "ListAgents", {}, { ...bearer(globex, "acme"), "X-Org-ID": "acme" });
      expectError(res, 403, "permission_denied");
    });
  });
});
