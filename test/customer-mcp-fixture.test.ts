/**
 * Self-check of the customer MCP server fixture (test/support/customer-mcp.ts)
 * against the real SDK client, raw fetch and the in-process oidc-provider IdP.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { importJWK, SignJWT } from "jose";

import {
  reservePort,
  STATIC_UNAUTHORIZED_BODY,
  startOAuthMcp,
  startOpenMcp,
  startStaticBearerMcp,
  type CustomerMcp,
  type OAuthCustomerMcp,
} from "./support/customer-mcp.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";

const LIST_TOOLS = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
const MCP_HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
};

async function connect(url: string, headers?: Record<string, string>): Promise<Client> {
  const client = new Client({ name: "fixture-check", version: "0.0.0" });
  const transport = new StreamableHTTPClientTransport(
    new URL(url),
    headers === undefined ? undefined : { requestInit: { headers } },
  );
  await client.connect(transport);
  return client;
}

function text(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === "text" ? first.text : "";
}

describe("startOpenMcp", () => {
  let mcp: CustomerMcp;
  let client: Client;
  beforeAll(async () => {
    mcp = await startOpenMcp();
    client = await connect(mcp.url);
  });
  afterAll(async () => {
    await client.close();
    await mcp.close();
  });

  it("lists and calls the tools through the SDK client", async () => {
    expect(mcp.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["add", "echo", "fail", "slow", "track"]);

    const echo = (await client.callTool({ name: "echo", arguments: { text: "hi" } })) as CallToolResult;
    expect(text(echo)).toBe("echo: hi");
    expect(echo.structuredContent).toEqual({ text: "hi" });

    const add = (await client.callTool({ name: "add", arguments: { a: 2, b: 3 } })) as CallToolResult;
    expect(add.structuredContent).toEqual({ sum: 5 });

    const fail = (await client.callTool({ name: "fail", arguments: {} })) as CallToolResult;
    expect(fail.isError).toBe(true);
    expect(text(fail)).toBe("it failed");

    const slow = (await client.callTool({ name: "slow", arguments: { ms: 50 } })) as CallToolResult;
    expect(slow.structuredContent).toEqual({ waited: 50 });

    expect(mcp.toolCalls()).toEqual([
      { name: "echo", arguments: { text: "hi" } },
      { name: "add", arguments: { a: 2, b: 3 } },
      { name: "fail", arguments: {} },
      { name: "slow", arguments: { ms: 50 } },
    ]);
    expect(mcp.requests()).toBeGreaterThan(0);
    expect(mcp.authorizedRequests()).toBe(mcp.requests());
  });

  it("close() does not wait for a pending slow call", async () => {
    const other = await startOpenMcp();
    const c = await connect(other.url);
    const pending = c.callTool({ name: "slow", arguments: { ms: 60_000 } });
    pending.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 100));
    await other.close();
    await expect(pending).rejects.toThrow();
    await c.close();
  });
});

describe("startStaticBearerMcp", () => {
  let mcp: CustomerMcp;
  beforeAll(async () => {
    mcp = await startStaticBearerMcp("s3cret");
  });
  afterAll(() => mcp.close());

  it("accepts the right token via requestInit headers", async () => {
    const client = await connect(mcp.url, { Authorization: "Bearer s3cret" });
    const { tools } = await client.listTools();
    expect(tools).toHaveLength(5);
    await client.close();
  });

  it("answers 401 with the exact JSON-RPC body for a wrong or missing token", async () => {
    const before = mcp.authorizedRequests();
    for (const authorization of ["Bearer wrong", undefined]) {
      const res = await fetch(mcp.url, {
        method: "POST",
        headers: { ...MCP_HEADERS, ...(authorization ? { authorization } : {}) },
        body: LIST_TOOLS,
      });
      expect(res.status).toBe(401);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(res.headers.get("www-authenticate")).toBeNull();
      expect(await res.text()).toBe(STATIC_UNAUTHORIZED_BODY);
    }
    expect(mcp.authorizedRequests()).toBe(before);
  });
});

describe("startOAuthMcp", () => {
  const SCOPE = "mcp:crm";
  let idp: TestIdp;
  let mcp: OAuthCustomerMcp;
  let mcpUrl: string;
  let port: number;

  beforeAll(async () => {
    port = await reservePort();
    mcpUrl = `http://127.0.0.1:${port}/mcp`;
    idp = await startIdp({
      clients: [{ clientId: "agent", clientSecret: "agent-secret", scope: `${SCOPE} other` }],
      scopes: [SCOPE, "other"],
      audience: mcpUrl,
      accessTokenFormat: "jwt",
    });
    mcp = await startOAuthMcp({ port, issuer: idp.issuer, jwksUrl: idp.jwksUrl, requiredScope: SCOPE });
  });
  afterAll(async () => {
    await mcp.close();
    await idp.stop();
  });

  it("challenges an unauthenticated request (seed 5.2)", async () => {
    expect(mcp.url).toBe(mcpUrl);
    expect(mcp.metadataUrl).toBe(`${mcpUrl}/.well-known/oauth-protected-resource`);
    const res = await fetch(mcp.url, { method: "POST", headers: MCP_HEADERS, body: LIST_TOOLS });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${mcp.metadataUrl}", error="invalid_token"`,
    );
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await res.text()).toContain("Authorization");
  });

  it("serves the protected resource metadata at the seed path only", async () => {
    const res = await fetch(mcp.metadataUrl);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      resource: mcpUrl,
      authorization_servers: [idp.issuer],
      scopes_supported: [SCOPE],
      bearer_methods_supported: ["header"],
    });
    const other = await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`);
    expect(other.status).toBe(404);
    expect(mcp.metadataRequests()).toBe(1);
  });

  it("lets the SDK client in with a scoped IdP token and counts requests", async () => {
    const before = { all: mcp.requests(), ok: mcp.authorizedRequests() };
    const token = await idp.token("agent", SCOPE);
    const client = await connect(mcp.url, { Authorization: `Bearer ${token}` });
    const { tools } = await client.listTools();
    expect(tools).toHaveLength(5);
    const echo = (await client.callTool({ name: "echo", arguments: { text: "x" } })) as CallToolResult;
    expect(echo.structuredContent).toEqual({ text: "x" });
    await client.close();
    const all = mcp.requests() - before.all;
    expect(all).toBeGreaterThanOrEqual(3); // initialize, initialized, tools/list, tools/call (+ GET 405)
    expect(mcp.authorizedRequests() - before.ok).toBe(all);
  });

  it("answers 403 insufficient_scope for a token without the scope", async () => {
    const token = await idp.token("agent", "other");
    const before = mcp.authorizedRequests();
    const res = await fetch(mcp.url, {
      method: "POST",
      headers: { ...MCP_HEADERS, authorization: `Bearer ${token}` },
      body: LIST_TOOLS,
    });
    expect(res.status).toBe(403);
    expect(res.headers.get("www-authenticate")).toBe(`Bearer error="insufficient_scope", scope="${SCOPE}"`);
    expect(mcp.authorizedRequests()).toBe(before);
  });

  it("rejects a token for another audience, another issuer or expired with 401", async () => {
    const jwk = idp.privateJwks.keys[0];
    if (jwk === undefined) throw new Error("no key");
    const key = await importJWK(jwk, "RS256");
    const forge = (claims: { iss?: string; aud?: string; exp?: number }): Promise<string> =>
      new SignJWT({ scope: SCOPE, client_id: "agent" })
        .setProtectedHeader({ alg: "RS256", kid: jwk.kid ?? "", typ: "at+jwt" })
        .setIssuer(claims.iss ?? idp.issuer)
        .setAudience(claims.aud ?? mcpUrl)
        .setIssuedAt()
        .setExpirationTime(claims.exp ?? Math.floor(Date.now() / 1000) + 300)
        .sign(key);

    const good = await forge({});
    const ok = await fetch(mcp.url, {
      method: "POST",
      headers: { ...MCP_HEADERS, authorization: `Bearer ${good}` },
      body: LIST_TOOLS,
    });
    expect(ok.status).toBe(200);

    for (const bad of [
      await forge({ aud: "http://127.0.0.1:1/mcp" }),
      await forge({ iss: "http://evil.example" }),
      await forge({ exp: Math.floor(Date.now() / 1000) - 120 }),
      "not-a-jwt",
    ]) {
      const res = await fetch(mcp.url, {
        method: "POST",
        headers: { ...MCP_HEADERS, authorization: `Bearer ${bad}` },
        body: LIST_TOOLS,
      });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(
        new RegExp(`^Bearer resource_metadata="${mcp.metadataUrl}", error="invalid_token"`),
      );
    }
  });

  it("supports the RFC 9728 path, advertised overrides and a challenge without metadata URL", async () => {
    const other = await startOAuthMcp({
      issuer: idp.issuer,
      jwksUrl: idp.jwksUrl,
      requiredScope: SCOPE,
      metadataPath: "rfc9728",
      advertisedIssuer: "http://127.0.0.1:9/other-as",
      advertisedResource: "http://127.0.0.1:9/mcp",
      challengeWithoutMetadataUrl: true,
    });
    try {
      const base = new URL(other.url).origin;
      expect(other.metadataUrl).toBe(`${base}/.well-known/oauth-protected-resource/mcp`);
      const res = await fetch(other.url, { method: "POST", headers: MCP_HEADERS, body: LIST_TOOLS });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Bearer error="invalid_token"');
      expect((await fetch(`${other.url}/.well-known/oauth-protected-resource`)).status).toBe(404);
      const meta = await fetch(other.metadataUrl);
      expect(await meta.json()).toMatchObject({
        resource: "http://127.0.0.1:9/mcp",
        authorization_servers: ["http://127.0.0.1:9/other-as"],
      });
    } finally {
      await other.close();
    }
  });
});
