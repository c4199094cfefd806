// The platform MCP endpoint as a standard protected resource (issue 13,
// SPEC §3): stock MCP SDK clients that discover authorization from the 401
// challenge, tokens whose audience is the advertised resource `<public
// url>/mcp` for every tenant, and JSON-RPC error shapes for bodies the SDK
// never sees.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { decodeJwt } from "jose";
import { ensureDevTenant } from "../src/cli/dev-tenant.js";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { freeLoopbackPort } from "./support/listen.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";

const API = "https://api.agentplane.test";
const SCOPES = ["platform:read", "platform:write", "mcp:platform.read", "mcp:platform.write", "mcp:platform"];
const BODY_LIMIT = 64 * 1024;
type Json = Record<string, unknown>;

const INIT = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

// Two servers on one port each, with an IdP whose only resource is that
// server's MCP endpoint: what a client gets when it asks for the resource it
// calls (RFC 8707), one in JWT mode and one with introspection.
async function serverWithMcpIdp(mode: "jwt" | "introspection") {
  const port = await freeLoopbackPort();
  const mcpResource = `http://127.0.0.1:${port}/mcp`;
  const idp = await startIdp({
    clients: [
      { clientId: "ci-bot", clientSecret: "ci-secret", scope: SCOPES.join(" ") },
      { clientId: "stranger", clientSecret: "stranger-secret", scope: SCOPES.join(" ") },
      { clientId: "rs", clientSecret: "rs-secret", scope: "mcp:platform.read" },
    ],
    scopes: SCOPES,
    audience: mcpResource,
    accessTokenFormat: mode === "jwt" ? "jwt" : "opaque",
  });
  const authenticator = createAuthenticator(
    mode === "jwt"
      ? { mode: "jwt", issuer: idp.issuer, audience: API, algorithms: ["RS256"], clockToleranceSeconds: 60 }
      : { mode: "introspection", url: idp.introspectionEndpoint, clientId: "rs", clientSecret: "rs-secret", audience: API, cacheTtlSeconds: 60, timeoutMs: 2000 },
    { mcpResource },
  );
  const server = await startServer({ authenticator, mcpAuthorizationServers: [idp.issuer], port, http: { maxBodyBytes: BODY_LIMIT } });
  await server.seedTenant("acme", [{ subject: "ci-bot", role: "admin" }]);
  await server.seedTenant("globex", [{ subject: "stranger", role: "admin" }]);
  return { idp, server, mcpResource };
}

async function post(server: TestServer, body: string | undefined, headers: Record<string, string> = {}, query = "?tenant=acme") {
  const res = await fetch(`${server.url}/mcp${query}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body,
  });
  const text = await res.text();
  let json: Json | undefined;
  try {
    json = JSON.parse(text) as Json;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

describe.each(["jwt", "introspection"] as const)("MCP resource audience, %s mode", (mode) => {
  let idp: TestIdp;
  let server: TestServer;
  let mcpResource: string;
  beforeAll(async () => ({ idp, server, mcpResource } = await serverWithMcpIdp(mode)));
  afterAll(async () => {
    await server.close();
    await idp.stop();
  });

  it("a stock SDK client with client credentials discovers the IdP from the 401 and calls /mcp?tenant=acme", async () => {
    const provider = new ClientCredentialsProvider({
      clientId: "ci-bot",
      clientSecret: "ci-secret",
      scope: "mcp:platform.read mcp:platform.write",
      // Credentials go to this issuer only, whatever the server advertises.
      expectedIssuer: idp.issuer,
    });
    const client = new Client({ name: "ci", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp?tenant=acme`), { authProvider: provider }));
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(["list_agents", "create_agent"]));
    const listed = await client.callTool({ name: "list_agents", arguments: {} });
    expect(listed.isError).toBeFalsy();
    if (mode === "jwt") expect(decodeJwt(provider.tokens()!.access_token)).toMatchObject({ aud: mcpResource, client_id: "ci-bot" });
    await client.close();
  });

  it("the same token selects any tenant it is a member of, and nothing else: the resource has no tenant", async () => {
    const token = await idp.token("ci-bot", "mcp:platform.read");
    expect((await post(server, JSON.stringify(INIT), bearer(token))).status).toBe(200);
    const other = await post(server, JSON.stringify(INIT), bearer(token), "?tenant=globex");
    expect(other.status).toBe(403);
  });

  it("Connect and REST refuse the MCP-audience token with 401", async () => {
    const token = await idp.token("ci-bot", "platform:read mcp:platform.read");
    const connect = await connectCall(server, "ListAgents", {}, { ...bearer(token), "x-platform-tenant": "acme" });
    expect(connect.status).toBe(401);
    const rest = await fetch(`${server.url}/api/v1/agents`, { headers: { ...bearer(token), "x-platform-tenant": "acme" } });
    expect(rest.status).toBe(401);
  });
});

describe("challenges and JSON-RPC error shapes", () => {
  let idp: TestIdp;
  let server: TestServer;
  let token: string;
  beforeAll(async () => {
    ({ idp, server } = await serverWithMcpIdp("jwt"));
    token = await idp.token("ci-bot", "mcp:platform.read mcp:platform.write");
  });
  afterAll(async () => {
    await server.close();
    await idp.stop();
  });
  const prm = () => `${server.url}/.well-known/oauth-protected-resource/mcp`;

  it("a request without a token gets a challenge without error= (RFC 6750 §3.1), with the read and write scopes", async () => {
    const res = await post(server, JSON.stringify(INIT));
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(`Bearer resource_metadata="${prm()}", scope="mcp:platform.read mcp:platform.write"`);
    expect(res.json).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000 } });
  });

  it("a bad token gets error=\"invalid_token\"", async () => {
    const res = await post(server, JSON.stringify(INIT), bearer("not-a-token"));
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(`Bearer resource_metadata="${prm()}", error="invalid_token", scope="mcp:platform.read mcp:platform.write"`);
  });

  it("the metadata names the resource without a query, for every tenant", async () => {
    const doc = (await (await fetch(prm())).json()) as Json;
    expect(doc).toMatchObject({ resource: `${server.url}/mcp`, authorization_servers: [idp.issuer] });
  });

  it("invalid JSON is -32700 Parse error with HTTP 400", async () => {
    const res = await post(server, "{not json", bearer(token));
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.stringMatching(/^Parse error/) } });
  });

  it("an empty body is -32600 Invalid Request with HTTP 400", async () => {
    for (const body of [undefined, ""]) {
      const res = await post(server, body, bearer(token));
      expect(res.status).toBe(400);
      expect(res.json).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringMatching(/^Invalid Request/) } });
    }
  });

  it("a body over the limit is -32600 with HTTP 413, before authentication", async () => {
    const big = JSON.stringify({ ...INIT, params: { ...INIT.params, pad: "x".repeat(BODY_LIMIT) } });
    for (const headers of [bearer(token), {}]) {
      const res = await post(server, big, headers);
      expect(res.status).toBe(413);
      expect(res.json).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringContaining(`${BODY_LIMIT} bytes`) } });
    }
  });

  it("a content type other than JSON is -32600 with HTTP 415", async () => {
    const res = await post(server, JSON.stringify(INIT), { ...bearer(token), "content-type": "text/plain" });
    expect(res.status).toBe(415);
    expect(res.json).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringContaining("application/json") } });
  });

  const call = (params: unknown) => JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params });
  const expectInvalidParams = (res: Awaited<ReturnType<typeof post>>, mentions: RegExp) => {
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ jsonrpc: "2.0", id: 7, error: { code: -32602 } });
    const message = (res.json!.error as { message: string }).message;
    expect(message).toMatch(/^Invalid params/);
    expect(message).toMatch(mentions);
    expect(message.length).toBeLessThan(300);
  };
  const malformed: [unknown, RegExp][] = [
    [{ name: "list_agents", arguments: "all of them" }, /arguments must be an object/],
    [{ name: "list_agents", arguments: [1, 2] }, /arguments must be an object/],
    [{ arguments: {} }, /params.name/],
    [{ name: "no_such_tool", arguments: {} }, /no_such_tool/],
  ];
  const misfit: [unknown, RegExp][] = [
    [{ name: "list_agents", arguments: { page_size: "many" } }, /arguments.page_size/],
    [{ name: "list_agents", arguments: { no_such_field: 1 } }, /no_such_field/],
  ];

  it("a malformed tools/call is -32602 Invalid params with a short message, in every protocol revision", async () => {
    for (const version of [undefined, "2025-06-18", "2025-11-25"])
      for (const [params, mentions] of malformed)
        expectInvalidParams(await post(server, call(params), { ...bearer(token), ...(version && { "mcp-protocol-version": version }) }), mentions);
  });

  it("arguments that do not fit the tool's input are -32602 before 2025-11-25 (no header means 2025-03-26)", async () => {
    for (const version of [undefined, "2025-06-18"])
      for (const [params, mentions] of misfit)
        expectInvalidParams(await post(server, call(params), { ...bearer(token), ...(version && { "mcp-protocol-version": version }) }), mentions);
  });

  it("and a tool execution error the model can read from 2025-11-25 on (SEP-1303)", async () => {
    for (const [params, mentions] of misfit) {
      const res = await post(server, call(params), { ...bearer(token), "mcp-protocol-version": "2025-11-25" });
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ id: 7, result: { isError: true, structuredContent: { error: { code: "invalid_argument" } } } });
      const text = ((res.json!.result as { content: { text: string }[] }).content[0]!.text);
      expect(text).toMatch(mentions);
      expect(text.length).toBeLessThan(300);
    }
  });

  it("a business rule the service refuses stays a tool error the model can read (isError)", async () => {
    const res = await post(
      server,
      JSON.stringify({ jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "create_agent", arguments: { agent: { name: "" } } } }),
      bearer(token),
    );
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ id: 8, result: { isError: true, structuredContent: { error: { code: "invalid_argument" } } } });
  });
});

describe("the agentplane dev issuer", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ devIssuer: true });
    await ensureDevTenant(server.store, server.app.platform, [server.devIssuer!.clientId]);
  });
  afterAll(() => server.close());

  it("a stock SDK client with client credentials completes from the 401 against /mcp?tenant=dev", async () => {
    const provider = new ClientCredentialsProvider({
      clientId: server.devIssuer!.clientId,
      clientSecret: server.devIssuer!.clientSecret,
      scope: "mcp:platform.read",
      expectedIssuer: server.url,
    });
    const client = new Client({ name: "ci", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp?tenant=dev`), { authProvider: provider }));
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain("list_agents");
    expect(decodeJwt(provider.tokens()!.access_token)).toMatchObject({ aud: `${server.url}/mcp` });
    await client.close();
  });

  it("its token endpoint honours the resource indicator, and refuses one it does not serve (invalid_target)", async () => {
    const issue = (resource: string) =>
      fetch(`${server.url}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "client_credentials",
          client_id: server.devIssuer!.clientId,
          client_secret: server.devIssuer!.clientSecret,
          resource,
        }),
      });
    const mcp = await issue(`${server.url}/mcp`);
    expect(decodeJwt(((await mcp.json()) as { access_token: string }).access_token).aud).toBe(`${server.url}/mcp`);
    const foreign = await issue("https://elsewhere.example/mcp");
    expect(foreign.status).toBe(400);
    expect(await foreign.json()).toMatchObject({ error: "invalid_target" });
  });
});
