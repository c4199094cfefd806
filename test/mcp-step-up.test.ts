// An MCP client that signs in to `agentplane dev` can write (issue 21 item 1):
// a stock MCP SDK client, with PKCE and dynamic registration, driven only by
// /mcp's challenges (the 401 on the first request, the 403
// `insufficient_scope` of MCP 2025-11-25's scope challenge handling) and a
// person pressing the sign-in page's button. The role still decides: a
// viewer is refused writes whatever scopes the token carries.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { auth, UnauthorizedError, type OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { decodeJwt } from "jose";
import { ensureDevTenant } from "../src/cli/dev-tenant.js";
import { DEV_USER } from "../src/integrations/identity/dev-login.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";
import { Browser, signIn } from "./support/dev-sign-in.js";
import { startServer, type TestServer } from "./support/server.js";

const REDIRECT = "http://127.0.0.1:9/callback";
const READ = "mcp:platform.read";
const WRITE = "mcp:platform.write";

// What an MCP application keeps for one server (client registration,
// tokens, the PKCE verifier), as the SDK's OAuthClientProvider asks; the
// authorization URL goes to a person at the sign-in page, and the code that
// comes back is what the application hands to `finishAuth`.
class SignedInApp implements OAuthClientProvider {
  client?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = "";
  codes: string[] = [];
  pages: string[] = [];
  readonly browser = new Browser();
  constructor(
    private readonly server: TestServer,
    private readonly grantTypes: string[],
  ) {}
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return { client_name: "step-up test client", redirect_uris: [REDIRECT], grant_types: this.grantTypes, response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation = () => this.client;
  saveClientInformation = (info: OAuthClientInformationMixed) => void (this.client = info);
  tokens = () => this.saved;
  saveTokens = (t: OAuthTokens) => void (this.saved = t);
  saveCodeVerifier = (v: string) => void (this.verifier = v);
  codeVerifier = () => this.verifier;
  invalidateCredentials = (scope: string) => {
    if (scope === "all" || scope === "client") this.client = undefined;
    if (scope === "all" || scope === "tokens") this.saved = undefined;
  };
  async redirectToAuthorization(url: URL) {
    const done = await signIn(this.server, url.href, this.browser);
    this.pages.push(done.page);
    this.codes.push(done.callback.searchParams.get("code")!);
  }
  scopes = () => String(decodeJwt(this.saved!.access_token).scope).split(" ");
}

const call = async (client: Client, name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;

describe("MCP sign-in and step-up on `agentplane dev`", () => {
  let server: TestServer;
  let endpoint: URL;

  beforeAll(async () => {
    server = await startServer({ devIssuer: true });
    await ensureDevTenant(server.store, server.app.platform, [server.devIssuer!.clientId, DEV_USER]);
    // A tenant where the person who signs in is only a viewer.
    await server.seedTenant("viewed", [{ subject: DEV_USER, role: "viewer" }]);
    endpoint = new URL(`${server.url}/mcp?tenant=dev`);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("asks an interactive client for read and write in the first challenge", async () => {
    const res = await fetch(endpoint, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp", scope="${READ} ${WRITE}"`,
    );
  });

  it("signs a stock SDK client in with the write tools following only the 401 challenge; it creates an agent", async () => {
    const app = new SignedInApp(server, ["authorization_code", "refresh_token"]);
    const first = new StreamableHTTPClientTransport(endpoint, { authProvider: app });
    await expect(new Client({ name: "t", version: "1" }).connect(first)).rejects.toThrow(UnauthorizedError);
    expect(app.pages[0]).toContain(`<code>${WRITE}</code>`);
    await first.finishAuth(app.codes[0]!);
    expect(app.scopes()).toEqual([READ, WRITE]);
    expect(app.saved!.refresh_token).toBeDefined();

    const mcp = new Client({ name: "t", version: "1" });
    await mcp.connect(new StreamableHTTPClientTransport(endpoint, { authProvider: app }));
    expect((await mcp.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(["list_agents", "create_agent", "run_agent"]));
    const created = await call(mcp, "create_agent", { agent: { name: "signed-in", model: PLACEHOLDER_MODEL } });
    expect(created.isError).toBeFalsy();
    expect(created.structuredContent).toMatchObject({ agent: { name: "signed-in" } });
    await mcp.close();

    // Where the person is a viewer, the same token lists no write tool and
    // a write is refused by the role: a tool error, no scope challenge to
    // step up from.
    const viewer = new Client({ name: "t", version: "1" });
    await viewer.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp?tenant=viewed`), { authProvider: app }));
    const names = (await viewer.listTools()).tools.map((t) => t.name);
    expect(names).toContain("list_agents");
    expect(names).not.toContain("create_agent");
    const refused = await call(viewer, "create_agent", { agent: { name: "no", model: PLACEHOLDER_MODEL } });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toEqual({ error: { code: "permission_denied", message: 'CreateAgent needs the admin role in tenant "viewed"' } });
    expect(app.codes).toHaveLength(1);
    await viewer.close();
  });

  it("steps a read-only sign-in up to write at the 403 scope challenge, keeping read", async () => {
    // A client that signed in for reading only (it registered with that
    // scope too) and keeps no refresh token.
    const app = new SignedInApp(server, ["authorization_code"]);
    expect(await auth(app, { serverUrl: endpoint, scope: READ })).toBe("REDIRECT");
    expect(await auth(app, { serverUrl: endpoint, authorizationCode: app.codes[0]! })).toBe("AUTHORIZED");
    expect(app.scopes()).toEqual([READ]);
    expect(app.saved!.refresh_token).toBeUndefined();

    const transport = new StreamableHTTPClientTransport(endpoint, { authProvider: app });
    const mcp = new Client({ name: "t", version: "1" });
    await mcp.connect(transport);
    expect((await mcp.listTools()).tools.map((t) => t.name)).not.toContain("create_agent");

    // The challenge names the scope the call needs and the one to keep.
    const challenge = await fetch(endpoint, {
      method: "POST",
      headers: { authorization: `Bearer ${app.saved!.access_token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "create_agent", arguments: { agent: { name: "x" } } } }),
    });
    expect(challenge.status).toBe(403);
    expect(challenge.headers.get("www-authenticate")).toBe(
      `Bearer error="insufficient_scope", scope="${READ} ${WRITE}", resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp"`,
    );

    // The SDK answers the 403 by sending the person to sign in again for
    // both scopes, with the client it registered for reading.
    const clientId = app.client!.client_id;
    const write = { agent: { name: "stepped-up", model: PLACEHOLDER_MODEL } };
    await expect(call(mcp, "create_agent", write)).rejects.toThrow(UnauthorizedError);
    expect(app.codes).toHaveLength(2);
    expect(app.pages[1]).toContain(`<code>${READ}</code> <code>${WRITE}</code>`);
    await transport.finishAuth(app.codes[1]!);
    expect(app.client!.client_id).toBe(clientId);
    expect(app.scopes()).toEqual([READ, WRITE]);

    const created = await call(mcp, "create_agent", write);
    expect(created.isError).toBeFalsy();
    expect(created.structuredContent).toMatchObject({ agent: { name: "stepped-up" } });
    expect((await mcp.listTools()).tools.map((t) => t.name)).toContain("create_agent");
    await mcp.close();
  });

  it("leaves a read-only SDK 1.x client holding a refresh token one way to write: forget its tokens and sign in again (as the guide says)", async () => {
    const app = new SignedInApp(server, ["authorization_code", "refresh_token"]);
    await auth(app, { serverUrl: endpoint, scope: READ });
    await auth(app, { serverUrl: endpoint, authorizationCode: app.codes[0]! });
    expect(app.saved!.refresh_token).toBeDefined();
    const write = { agent: { name: "after-sign-out", model: PLACEHOLDER_MODEL } };

    // The SDK answers the 403 with a refresh, which keeps the read scope
    // (RFC 6749 §6), and gives up (upstream typescript-sdk issue 2255). When
    // this starts passing, the SDK steps up: update the guide.
    const stuck = new Client({ name: "t", version: "1" });
    await stuck.connect(new StreamableHTTPClientTransport(endpoint, { authProvider: app }));
    await expect(call(stuck, "create_agent", write)).rejects.toThrow("Server returned 403 after trying upscoping");
    expect(app.codes).toHaveLength(1);
    expect(app.scopes()).toEqual([READ]);
    await stuck.close();

    app.invalidateCredentials("tokens");
    const transport = new StreamableHTTPClientTransport(endpoint, { authProvider: app });
    await expect(new Client({ name: "t", version: "1" }).connect(transport)).rejects.toThrow(UnauthorizedError);
    await transport.finishAuth(app.codes[1]!);
    expect(app.scopes()).toEqual([READ, WRITE]);
    const mcp = new Client({ name: "t", version: "1" });
    await mcp.connect(new StreamableHTTPClientTransport(endpoint, { authProvider: app }));
    expect((await call(mcp, "create_agent", write)).isError).toBeFalsy();
    await mcp.close();
  });
});
