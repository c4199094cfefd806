// ListMemberships (the console's tenant switcher) through the real server:
// Connect, the REST mirror and the platform MCP endpoint, with tokens from a
// real OAuth server; in control-plane mode and in claim mode.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SignJWT, importJWK } from "jose";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";

const AUD = "https://api.agentplane.test";
const SCOPES = ["platform:read", "platform:write", "platform:admin", "mcp:platform.read", "mcp:platform"];
// Client credentials tokens: the subject is the client_id.
const CLIENTS = ["both", "stranger", "operator"];

type Json = Record<string, unknown>;

let idp: TestIdp;
let server: TestServer;

const jwtAuth = () => createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 });

async function rest(path: string, headers: Record<string, string>): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${server.url}${path}`, { headers });
  return { status: res.status, body: (await res.json()) as Json };
}

beforeAll(async () => {
  idp = await startIdp({
    accessTokenFormat: "jwt",
    audience: AUD,
    scopes: SCOPES,
    clients: CLIENTS.map((clientId) => ({ clientId, clientSecret: `${clientId}-secret-0123456789`, scope: SCOPES.join(" ") })),
  });
  server = await startServer({ authenticator: jwtAuth(), mcpAuthorizationServers: [idp.issuer] });
  await server.seedTenant("acme", [{ subject: "both", role: "admin" }]);
  await server.seedTenant("globex", [
    { subject: "both", role: "viewer" },
    { subject: "stranger-not", role: "admin" },
  ]);
  await server.seedTenant("initech", [{ subject: "operator", role: "viewer" }]);
  await server.seedTenant("hooli", [{ subject: "someone", role: "admin" }]);
});
afterAll(async () => {
  await server?.close();
  await idp?.stop();
});

describe("control plane", () => {
  it("shows a member of two tenants both, with its role in each, newest tenant first", async () => {
    const t = await idp.token("both", "platform:read");
    const expected = {
      memberships: [
        { tenant: "globex", displayName: "globex", role: "ROLE_VIEWER" },
        { tenant: "acme", displayName: "acme", role: "ROLE_ADMIN" },
      ],
    };
    const connect = await connectCall(server, "ListMemberships", {}, bearer(t));
    expect(connect).toMatchObject({ status: 200, body: expected });
    expect(await rest("/api/v1/memberships", bearer(t))).toEqual({ status: 200, body: expected });
  });

  it("ignores a tenant header, even one the caller is not a member of", async () => {
    const t = await idp.token("both", "platform:read");
    const res = await connectCall(server, "ListMemberships", {}, bearer(t, "hooli"));
    expect(res.status).toBe(200);
    expect((res.body.memberships as Json[]).map((m) => m.tenant)).toEqual(["globex", "acme"]);
    expect((await connectCall(server, "ListMemberships", {}, bearer(t, "not a slug"))).status).toBe(200);
  });

  it("shows a stranger none, however close its subject is to a member's", async () => {
    const t = await idp.token("stranger", "platform:read platform:write");
    expect(await connectCall(server, "ListMemberships", {}, bearer(t))).toMatchObject({ status: 200, body: {} });
    expect(await rest("/api/v1/memberships", bearer(t))).toEqual({ status: 200, body: { memberships: [] } });
  });

  it("pages by keyset: page_size 1 gives one tenant and a token for the next", async () => {
    const t = await idp.token("both", "platform:read");
    const first = await rest("/api/v1/memberships?page_size=1", bearer(t));
    expect(first.body).toEqual({ memberships: [{ tenant: "globex", displayName: "globex", role: "ROLE_VIEWER" }], nextPageToken: expect.any(String) });
    const second = await connectCall(server, "ListMemberships", { pageSize: 1, pageToken: first.body.nextPageToken }, bearer(t));
    expect(second.body).toEqual({ memberships: [{ tenant: "acme", displayName: "acme", role: "ROLE_ADMIN" }] });
    const bad = await connectCall(server, "ListMemberships", { pageToken: "nope" }, bearer(t));
    expect(bad).toMatchObject({ status: 400, body: { code: "invalid_argument", message: expect.stringMatching(/^page_token: /) } });
    const negative = await connectCall(server, "ListMemberships", { pageSize: -1 }, bearer(t));
    expect(negative).toMatchObject({ status: 400, body: { code: "invalid_argument", message: expect.stringMatching(/^page_size: /) } });
  });

  it("needs a read scope and a token", async () => {
    const adminOnly = await idp.token("both", "platform:admin");
    expect(await connectCall(server, "ListMemberships", {}, bearer(adminOnly))).toMatchObject({
      status: 403,
      body: { code: "permission_denied", message: "missing scope: ListMemberships needs platform:read or platform:write" },
    });
    const writer = await idp.token("both", "platform:write");
    expect((await connectCall(server, "ListMemberships", {}, bearer(writer))).status).toBe(200);
    expect(await connectCall(server, "ListMemberships", {}, {})).toMatchObject({ status: 401, body: { code: "unauthenticated" } });
    expect((await rest("/api/v1/memberships", {})).status).toBe(401);
  });

  it("shows a platform admin every tenant: its Member row's role, else no role", async () => {
    const t = await idp.token("operator", "platform:read platform:admin");
    const res = await rest("/api/v1/memberships?page_size=100", bearer(t));
    expect(res.status).toBe(200);
    const roles = Object.fromEntries((res.body.memberships as Json[]).map((m) => [m.tenant, m.role]));
    // No role (ROLE_UNSPECIFIED, omitted in JSON) where it has no Member row:
    // it may only manage members there, so the console offers no write controls.
    expect(roles).toEqual({ acme: undefined, globex: undefined, initech: "ROLE_VIEWER", hooli: undefined });
  });
});

describe("platform MCP", () => {
  async function connect(bearerToken: string): Promise<Client> {
    const client = new Client({ name: "test", version: "1.0.0" });
    const url = new URL(`${server.url}/mcp?tenant=acme`);
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: bearer(bearerToken) } }));
    return client;
  }

  it("lists list_memberships to a read token, described from its access rule, and answers across tenants", async () => {
    const client = await connect(await idp.token("both", "mcp:platform.read"));
    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === "list_memberships");
    expect(tool?.description).toBe(
      "List Memberships (platform.v1.PlatformService/ListMemberships)." +
        " The tenants the caller is a member of, with its role in each: the console's tenant switcher. Lists every tenant for a `platform:admin` caller." +
        " Read-only. Needs mcp:platform.read or mcp:platform." +
        " Answers about the caller only, across tenants; the tenant selected is ignored.",
    );
    expect(tool?.annotations).toMatchObject({ readOnlyHint: true });
    const result = (await client.callTool({ name: "list_memberships", arguments: {} })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual({
      memberships: [
        { tenant: "globex", displayName: "globex", role: "ROLE_VIEWER" },
        { tenant: "acme", displayName: "acme", role: "ROLE_ADMIN" },
      ],
    });
    await client.close();
  });

  it("lists it to a platform admin standing in a tenant without a role there", async () => {
    const client = await connect(await idp.token("operator", "mcp:platform.read platform:admin"));
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toContain("list_memberships");
    expect(names).not.toContain("list_agents");
    await client.close();
  });
});

describe("claim mode (tenantClaim: org_id)", () => {
  let claimServer: TestServer;

  // A token signed with the IdP's real key, carrying an Auth0-style org_id.
  async function forge(claims: { scope: string; org_id?: unknown; sub?: string }): Promise<string> {
    const jwk = idp.privateJwks.keys[0]!;
    return new SignJWT({ ...claims, client_id: "claim-client" })
      .setProtectedHeader({ alg: "RS256", typ: "at+jwt", ...(jwk.kid ? { kid: jwk.kid } : {}) })
      .setIssuer(idp.issuer)
      .setAudience(AUD)
      .setSubject(claims.sub ?? "claim-client")
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(await importJWK(jwk, "RS256"));
  }

  beforeAll(async () => {
    claimServer = await startServer({ authenticator: jwtAuth(), tenantClaim: "org_id" });
    await claimServer.seedTenant("acme");
    await claimServer.seedTenant("globex", [{ subject: "claim-client", role: "viewer" }]);
  });
  afterAll(() => claimServer?.close());

  const list = async (t: string) => connectCall(claimServer, "ListMemberships", {}, bearer(t));

  it("shows the tenant the claim names, with the role its scopes make, and no other", async () => {
    expect((await list(await forge({ scope: "platform:read", org_id: "acme" }))).body).toEqual({
      memberships: [{ tenant: "acme", displayName: "acme", role: "ROLE_VIEWER" }],
    });
    expect((await list(await forge({ scope: "platform:read platform:write", org_id: "acme" }))).body).toEqual({
      memberships: [{ tenant: "acme", displayName: "acme", role: "ROLE_ADMIN" }],
    });
    // A Member row in the claimed tenant decides the role, as it does for authorization.
    expect((await list(await forge({ scope: "platform:read platform:write", org_id: "globex" }))).body).toEqual({
      memberships: [{ tenant: "globex", displayName: "globex", role: "ROLE_VIEWER" }],
    });
  });

  it("shows a platform admin every tenant: the claimed one with the claim's role, others by Member row, else no role", async () => {
    const res = await list(await forge({ scope: "platform:read platform:admin", org_id: "acme", sub: "operator" }));
    expect(res.body).toEqual({
      memberships: [
        { tenant: "globex", displayName: "globex" },
        { tenant: "acme", displayName: "acme", role: "ROLE_VIEWER" },
      ],
    });
  });

  it("shows none for a claim naming no tenant, a missing one, or none at all", async () => {
    for (const org_id of ["nosuch", 42, undefined, "Not A Slug"]) {
      const res = await list(await forge({ scope: "platform:read", org_id }));
      expect({ org_id, status: res.status, body: res.body }).toEqual({ org_id, status: 200, body: {} });
    }
  });
});
