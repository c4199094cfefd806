// Interactive login to `agentplane dev`: authorization code + PKCE through
// the dev issuer (oidc-provider behind the sign-in page), by plain HTTP as a
// browser would, and by a stock MCP SDK client following /mcp's challenge.
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError, type OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { decodeJwt } from "jose";
import { ensureDevTenant } from "../src/cli/dev-tenant.js";
import { CONSOLE_CLIENT_ID, CONSOLE_SCOPES, DEV_USER, REGISTRATION_LIMITS } from "../src/integrations/identity/dev-login.js";
import { Browser, location, pkce, signIn } from "./support/dev-sign-in.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";

async function register(server: TestServer, metadata: Record<string, unknown>): Promise<Response> {
  return fetch(`${server.url}/oauth/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(metadata) });
}

async function tokenRequest(server: TestServer, fields: Record<string, string>, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, string> };
}

async function mcpCall(server: TestServer, token: string, method: string, params: unknown = {}) {
  const res = await fetch(`${server.url}/mcp?tenant=dev`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return { status: res.status, body: (await res.json()) as { result?: { tools?: { name: string }[] }; error?: unknown } };
}

const REDIRECT = "http://127.0.0.1:9/callback";

describe("dev issuer login", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({ devIssuer: true });
    // A data dir from before the dev user, then the start that adds it.
    await ensureDevTenant(server.store, server.app.platform, [server.devIssuer!.clientId]);
    await ensureDevTenant(server.store, server.app.platform, [server.devIssuer!.clientId, DEV_USER]);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("publishes RFC 8414 and OpenID metadata whose issuer is the URL they are fetched under", async () => {
    for (const path of ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]) {
      const res = await fetch(`${server.url}${path}`, { headers: { origin: "http://elsewhere.test" } });
      expect(res.status).toBe(200);
      expect(res.headers.get("access-control-allow-origin")).toBe("http://elsewhere.test");
      const doc = (await res.json()) as Record<string, unknown>;
      expect(doc).toMatchObject({
        issuer: server.url,
        authorization_endpoint: `${server.url}/oauth/authorize`,
        token_endpoint: `${server.url}/oauth/token`,
        registration_endpoint: `${server.url}/oauth/register`,
        jwks_uri: `${server.url}/.well-known/jwks.json`,
        code_challenge_methods_supported: ["S256"],
      });
      expect(doc.response_types_supported).toEqual(["code"]);
      expect(doc.pushed_authorization_request_endpoint).toBeUndefined();
      expect(doc.grant_types_supported).toEqual(["authorization_code", "refresh_token", "client_credentials"]);
      expect(doc.token_endpoint_auth_methods_supported).toEqual(["none", "client_secret_basic", "client_secret_post"]);
      expect(doc.scopes_supported).toEqual(expect.arrayContaining(CONSOLE_SCOPES));
    }
    const jwks = await fetch(`${server.url}/.well-known/jwks.json`);
    expect(((await jwks.json()) as { keys: { d?: string }[] }).keys.map((k) => k.d)).toEqual([undefined]);
    const prmRes = await fetch(`${server.url}/.well-known/oauth-protected-resource/mcp`, { headers: { origin: "http://elsewhere.test" } });
    expect(prmRes.headers.get("access-control-allow-origin")).toBe("*");
    expect(((await prmRes.json()) as Record<string, unknown>).authorization_servers).toEqual([server.url]);
  });

  it("signs in a registered public client with code + PKCE; the token calls the API and /mcp", async () => {
    const reg = await register(server, {
      client_name: "Test <client>",
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    });
    expect(reg.status).toBe(201);
    expect(reg.headers.get("access-control-allow-origin")).toBe("*");
    const { client_id } = (await reg.json()) as { client_id: string };

    const { verifier, challenge } = pkce();
    const authorize = `${server.url}/oauth/authorize?${new URLSearchParams({
      response_type: "code",
      client_id,
      redirect_uri: REDIRECT,
      scope: "openid platform:read platform:write mcp:platform.read",
      state: "s-1",
      code_challenge: challenge,
      code_challenge_method: "S256",
    })}`;
    const { page, pageHeaders, callback } = await signIn(server, authorize);
    expect(page).toContain("Sign in to agentplane dev as dev-user");
    expect(page).toContain("Test &lt;client&gt;");
    expect(page).not.toContain("Test <client>");
    expect(page).toContain(REDIRECT);
    expect(page.match(/<button/g)).toHaveLength(1);
    expect(page).not.toMatch(/<script|https?:\/\/(?!127\.0\.0\.1)/);
    expect(pageHeaders.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(`${callback.origin}${callback.pathname}`).toBe(REDIRECT);
    expect(callback.searchParams.get("state")).toBe("s-1");
    const code = callback.searchParams.get("code")!;

    const exchange = { grant_type: "authorization_code", client_id, code, redirect_uri: REDIRECT };
    const wrong = await tokenRequest(server, { ...exchange, code_verifier: pkce().verifier });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe("invalid_grant");

    const ok = await tokenRequest(server, { ...exchange, code_verifier: verifier });
    expect(ok.status).toBe(200);
    // The access token's scope: the resource's, without `openid`.
    expect(ok.body).toMatchObject({ token_type: "Bearer", scope: "platform:read platform:write mcp:platform.read" });
    expect(decodeJwt(ok.body.access_token!)).toMatchObject({ iss: server.url, aud: server.url, sub: DEV_USER, client_id });
    expect(decodeJwt(ok.body.id_token!)).toMatchObject({ iss: server.url, aud: client_id, sub: DEV_USER });

    const list = await connectCall(server, "ListAgents", {}, bearer(ok.body.access_token!, "dev"));
    expect(list.status).toBe(200);
    const tools = await mcpCall(server, ok.body.access_token!, "tools/list");
    expect(tools.status).toBe(200);
    expect(tools.body.result?.tools?.map((t) => t.name)).toContain("list_agents");

    // Refresh: a new access token, and the refresh token rotates (public client).
    const refreshed = await tokenRequest(server, { grant_type: "refresh_token", client_id, refresh_token: ok.body.refresh_token! });
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.refresh_token).not.toBe(ok.body.refresh_token);
    expect((await connectCall(server, "ListAgents", {}, bearer(refreshed.body.access_token!, "dev"))).status).toBe(200);

    const again = await tokenRequest(server, { ...exchange, code_verifier: verifier });
    expect(again.status).toBe(400);
    expect(again.body.error).toBe("invalid_grant");
  });

  it("refuses an unregistered redirect URI with a page, never a redirect; requires PKCE", async () => {
    const reg = await register(server, { redirect_uris: [REDIRECT], token_endpoint_auth_method: "none" });
    const { client_id } = (await reg.json()) as { client_id: string };
    const { challenge } = pkce();
    const params = { response_type: "code", client_id, scope: "platform:read", code_challenge: challenge, code_challenge_method: "S256" };

    const res = await fetch(`${server.url}/oauth/authorize?${new URLSearchParams({ ...params, redirect_uri: "http://evil.test/cb" })}`, { redirect: "manual" });
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    expect(await res.text()).toContain("redirect_uri");

    const { code_challenge: _c, code_challenge_method: _m, ...withoutPkce } = params;
    const plain = await fetch(`${server.url}/oauth/authorize?${new URLSearchParams({ ...withoutPkce, redirect_uri: REDIRECT })}`, { redirect: "manual" });
    expect(plain.status).toBe(303);
    const back = new URL(plain.headers.get("location")!);
    expect(back.searchParams.get("error")).toBe("invalid_request");
    expect(back.searchParams.get("error_description")).toMatch(/PKCE/);
  });

  it("answers the button only in the browser that started the sign-in", async () => {
    const { challenge } = pkce();
    const browser = new Browser();
    const start = await browser.fetch(
      `${server.url}/oauth/authorize?${new URLSearchParams({
        response_type: "code",
        client_id: CONSOLE_CLIENT_ID,
        redirect_uri: `${server.url}/console/callback`,
        scope: "openid platform:read",
        code_challenge: challenge,
        code_challenge_method: "S256",
      })}`,
    );
    const interaction = location(start, server.url);
    // Another site's form post: the same URL, no interaction cookie.
    const forged = await fetch(interaction, { method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "" });
    expect(forged.status).toBe(400);
    expect(forged.headers.get("location")).toBeNull();
    expect(await forged.text()).toContain("Sign-in failed");
  });

  it("bounds registration: redirect URIs by count and length, the body by size", async () => {
    const many = await register(server, { redirect_uris: Array.from({ length: 11 }, (_, i) => `http://127.0.0.1:9/cb${i}`) });
    expect(many.status).toBe(400);
    expect(await many.json()).toEqual({ error: "invalid_redirect_uri", error_description: "at most 10 redirect_uris" });
    const long = await register(server, { redirect_uris: [`http://127.0.0.1:9/${"a".repeat(2001)}`] });
    expect(long.status).toBe(400);
    const fetching = await register(server, { redirect_uris: [REDIRECT], jwks_uri: "http://169.254.169.254/keys" });
    expect(fetching.status).toBe(400);
    expect(await fetching.json()).toMatchObject({ error: "invalid_client_metadata" });
    const huge = await register(server, { redirect_uris: [REDIRECT], client_uri: `http://127.0.0.1/${"a".repeat(20_000)}` });
    expect(huge.status).toBe(413);
  });

  it("logs the console in from its own origin: discovery, authorize, and the token exchange by fetch", async () => {
    const origin = server.url;
    const discovery = await fetch(`${server.url}/.well-known/openid-configuration`, { headers: { origin } });
    const { authorization_endpoint, token_endpoint } = (await discovery.json()) as Record<string, string>;
    const { verifier, challenge } = pkce();
    const redirectUri = `${server.url}/console/callback`;
    const { callback } = await signIn(
      server,
      `${authorization_endpoint}?${new URLSearchParams({
        response_type: "code",
        client_id: CONSOLE_CLIENT_ID,
        redirect_uri: redirectUri,
        scope: CONSOLE_SCOPES.join(" "),
        state: "c",
        code_challenge: challenge,
        code_challenge_method: "S256",
      })}`,
    );
    expect(`${callback.origin}${callback.pathname}`).toBe(redirectUri);
    const res = await fetch(token_endpoint!, {
      method: "POST",
      headers: { origin, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", client_id: CONSOLE_CLIENT_ID, code: callback.searchParams.get("code")!, redirect_uri: redirectUri, code_verifier: verifier }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe(origin);
    const { access_token, scope } = (await res.json()) as Record<string, string>;
    expect(scope).toBe(CONSOLE_SCOPES.filter((s) => s !== "openid").join(" "));
    expect((await connectCall(server, "ListAgents", {}, bearer(access_token!, "dev"))).status).toBe(200);
    // No platform:admin through an interactive login.
    const tenants = await connectCall(server, "ListTenants", {}, bearer(access_token!));
    expect(tenants.status).toBe(403);
  });

  it("gives a token for <public url>/mcp that audience; /mcp accepts it and the API does not", async () => {
    const { client_id } = (await (await register(server, { redirect_uris: [REDIRECT], token_endpoint_auth_method: "none" })).json()) as { client_id: string };
    const { verifier, challenge } = pkce();
    const resource = `${server.url}/mcp`;
    const { callback } = await signIn(
      server,
      `${server.url}/oauth/authorize?${new URLSearchParams({ response_type: "code", client_id, redirect_uri: REDIRECT, scope: "mcp:platform.read mcp:platform.write", resource, code_challenge: challenge, code_challenge_method: "S256" })}`,
    );
    const tok = await tokenRequest(server, { grant_type: "authorization_code", client_id, code: callback.searchParams.get("code")!, redirect_uri: REDIRECT, code_verifier: verifier, resource });
    expect(tok.status).toBe(200);
    expect(decodeJwt(tok.body.access_token!)).toMatchObject({ aud: resource, sub: DEV_USER, scope: "mcp:platform.read mcp:platform.write" });
    expect((await mcpCall(server, tok.body.access_token!, "tools/list")).status).toBe(200);
    const api = await connectCall(server, "ListAgents", {}, bearer(tok.body.access_token!, "dev"));
    expect(api.status).toBe(401);
    expect(api.body.message).toMatch(/MCP endpoint/);
  });

  it("lets a stock MCP SDK client log in by following /mcp's 401 challenge, then list tools", async () => {
    const browser = new Browser();
    let code: string | undefined;
    let client: OAuthClientInformationMixed | undefined;
    let tokens: OAuthTokens | undefined;
    let verifier = "";
    let consentPage = "";
    const provider: OAuthClientProvider = {
      redirectUrl: REDIRECT,
      clientMetadata: {
        client_name: "MCP SDK test client",
        redirect_uris: [REDIRECT],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      } satisfies OAuthClientMetadata,
      clientInformation: () => client,
      saveClientInformation: (info) => void (client = info),
      tokens: () => tokens,
      saveTokens: (t) => void (tokens = t),
      saveCodeVerifier: (v) => void (verifier = v),
      codeVerifier: () => verifier,
      async redirectToAuthorization(url) {
        const done = await signIn(server, url.href, browser);
        consentPage = done.page;
        code = done.callback.searchParams.get("code") ?? undefined;
      },
    };
    const endpoint = new URL(`${server.url}/mcp?tenant=dev`);
    const first = new StreamableHTTPClientTransport(endpoint, { authProvider: provider });
    await expect(new Client({ name: "t", version: "1" }).connect(first)).rejects.toThrow(UnauthorizedError);
    expect(consentPage).toContain("MCP SDK test client");
    expect(code).toBeDefined();
    await first.finishAuth(code!);
    expect(decodeJwt(tokens!.access_token)).toMatchObject({ aud: `${server.url}/mcp`, sub: DEV_USER });

    const mcp = new Client({ name: "t", version: "1" });
    await mcp.connect(new StreamableHTTPClientTransport(endpoint, { authProvider: provider }));
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name)).toContain("list_agents");
    await mcp.close();
  });

  it("still answers the seed's variant B token request: JSON, form, and Basic credentials", async () => {
    const issuer = server.devIssuer!;
    const json = await fetch(`${server.url}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ grant_type: "client_credentials", client_id: issuer.clientId, client_secret: issuer.clientSecret, audience: issuer.audience }),
    });
    expect(json.status).toBe(200);
    const form = await tokenRequest(server, { grant_type: "client_credentials", client_id: issuer.clientId, client_secret: issuer.clientSecret, scope: "platform:read" });
    expect(form.status).toBe(200);
    expect(form.body.scope).toBe("platform:read");
    const basic = Buffer.from(`${issuer.clientId}:${issuer.clientSecret}`).toString("base64");
    const viaBasic = await tokenRequest(server, { grant_type: "client_credentials" }, { authorization: `Basic ${basic}` });
    expect(viaBasic.status).toBe(200);
    expect(decodeJwt(viaBasic.body.access_token!)).toMatchObject({ sub: issuer.clientId, aud: issuer.audience });
    const wrong = await tokenRequest(server, { grant_type: "client_credentials", client_id: issuer.clientId, client_secret: "nope" });
    expect(wrong).toMatchObject({ status: 401, body: { error: "invalid_client" } });
    const broken = await fetch(`${server.url}/oauth/token`, { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
    expect(broken.status).toBe(400);
    expect(await broken.json()).toMatchObject({ error: "invalid_request" });
  });

  it("never grants platform:admin to an interactive login, whatever the client asks (issue 19 item 7)", async () => {
    const reg = await register(server, { redirect_uris: [REDIRECT], token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"] });
    const { client_id } = (await reg.json()) as { client_id: string };
    const { verifier, challenge } = pkce();
    const authorize = `${server.url}/oauth/authorize?${new URLSearchParams({
      response_type: "code",
      client_id,
      redirect_uri: REDIRECT,
      scope: "openid offline_access platform:admin platform:read",
      code_challenge: challenge,
      code_challenge_method: "S256",
    })}`;
    const { page, callback } = await signIn(server, authorize);
    expect(page).not.toContain("platform:admin");
    const code = callback.searchParams.get("code")!;
    const ok = await tokenRequest(server, { grant_type: "authorization_code", client_id, code, redirect_uri: REDIRECT, code_verifier: verifier });
    expect(ok.status).toBe(200);
    expect(ok.body.scope).toBe("platform:read");
    expect(String(decodeJwt(ok.body.access_token!).scope).split(" ")).not.toContain("platform:admin");
    const created = await connectCall(server, "CreateTenant", { tenant: { slug: "stolen" } }, bearer(ok.body.access_token!));
    expect(created.status).toBe(403);
    // Nor through the refresh token, asking for it again.
    const refreshed = await tokenRequest(server, { grant_type: "refresh_token", client_id, refresh_token: ok.body.refresh_token!, scope: "platform:admin platform:read" });
    expect({ status: refreshed.status, error: refreshed.body.error, token: refreshed.body.access_token }).toEqual({ status: 400, error: "invalid_scope", token: undefined });
  });

  it("answers a malformed Basic header at the token endpoint with invalid_client, not a server error", async () => {
    for (const credential of [Buffer.from("%E0%A4%A:secret").toString("base64"), Buffer.from("agentplane-dev:%").toString("base64"), "not base64 at all!"]) {
      const res = await tokenRequest(server, { grant_type: "client_credentials" }, { authorization: `Basic ${credential}` });
      expect({ credential, status: res.status, error: res.body.error }).toEqual({ credential, status: 401, error: "invalid_client" });
    }
  });

  it("keeps registered clients and keys across a restart, in files only the owner reads", async () => {
    const { client_id } = (await (await register(server, { redirect_uris: [REDIRECT], token_endpoint_auth_method: "none" })).json()) as { client_id: string };
    for (const file of ["dev-clients.json", "dev-issuer.json"]) expect(statSync(join(server.dir, file)).mode & 0o777).toBe(0o600);
    const restarted = await startServer({ devIssuer: true, dir: server.dir });
    try {
      const { challenge } = pkce();
      const res = await fetch(
        `${restarted.url}/oauth/authorize?${new URLSearchParams({ response_type: "code", client_id, redirect_uri: REDIRECT, scope: "platform:read", code_challenge: challenge, code_challenge_method: "S256" })}`,
        { redirect: "manual" },
      );
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toMatch(/^\/oauth\/interaction\//);
      expect(restarted.devIssuer!.publicJwks).toEqual(server.devIssuer!.publicJwks);
    } finally {
      await restarted.close();
    }
  });

  it("rate-limits registration: past a burst, 429 with Retry-After, and the clients file is not rewritten (issue 19 item 8)", async () => {
    const fresh = await startServer({ devIssuer: true });
    try {
      const file = join(fresh.dir, "dev-clients.json");
      const started = performance.now();
      const answers: Response[] = [];
      for (let i = 0; i < 40; i++) answers.push(await register(fresh, { redirect_uris: [REDIRECT], token_endpoint_auth_method: "none" }));
      const elapsedMs = performance.now() - started;
      const accepted = answers.filter((r) => r.status === 201).length;
      // The burst, and what the bucket refilled while the test ran (10 a minute).
      expect(accepted).toBeGreaterThanOrEqual(REGISTRATION_LIMITS.burst);
      expect(accepted).toBeLessThanOrEqual(REGISTRATION_LIMITS.burst + Math.ceil((elapsedMs / 60_000) * REGISTRATION_LIMITS.perMinute));
      const refused = answers.find((r) => r.status !== 201)!;
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(await refused.json()).toMatchObject({ error: "temporarily_unavailable" });
      expect((JSON.parse(readFileSync(file, "utf8")) as unknown[]).length).toBe(accepted);
    } finally {
      await fresh.close();
    }
  });
});
