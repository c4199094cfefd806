// The skill client as an OAuth client of every standard way a customer
// protects its MCP server: the four places protected resource metadata may
// be, the RFC 8414 / OpenID locations of the authorization server's
// metadata, and the three token endpoint client authentication methods
// (client_secret_basic, client_secret_post, private_key_jwt with RS256 and
// ES256), against a real oidc-provider and real MCP SDK servers; and what a
// user reads when the authorization server or the MCP server refuses.
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { calculateJwkThumbprint, type JWK } from "jose";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { runCli } from "./support/cli-process.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import {
  MCP_SCOPE,
  startAuthorizationServer,
  startLegacyMcp,
  startProtectedMcp,
  type AuthorizationServer,
  type LegacyMcp,
  type ProtectedMcp,
  type ProtectedMcpOptions,
} from "./support/oauth-interop.js";
import { bearer, connectMust, startServer, type TestServer } from "./support/server.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let admin: string;
let server: TestServer;
// Every authorization server and MCP server a test starts, stopped at the end.
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  server = await startServer({
    authenticator: issuer.authenticator(60),
    outboundAllow: ["127.0.0.0/8"],
    runtime: { executor: "agents", concurrency: 2 },
  });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
});
afterAll(async () => {
  await Promise.all(stops.map((stop) => stop()));
  await server.close();
});

async function must(method: string, body: unknown): Promise<Json> {
  return connectMust(server, method, body, bearer(admin, "acme"));
}

let names = 0;
async function createSkill(mcpUrl: string, oauth: Json): Promise<Json> {
  return (await must("CreateSkill", { skill: { name: `skill-${++names}`, mcpUrl, auth: { oauth } } })).skill as Json;
}

// Runs a one-step agent calling `echo` on the skill; the finished run.
async function runEcho(skillId: string, text: string): Promise<Json> {
  const agent = (await must("CreateAgent", { agent: { name: `echo ${++names}`, skillIds: [skillId], steps: [{ skillId, tool: "echo", arguments: `{"text": "${text}"}` }] } })).agent as Json;
  const { run } = (await must("RunAgent", { id: agent.id, input: {} })) as { run: Json };
  const deadline = Date.now() + 15_000;
  for (;;) {
    const current = (await must("GetRun", { id: run.id })).run as Json;
    if (!["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(current.status as string)) return current;
    if (Date.now() > deadline) throw new Error(`run ${String(run.id)} still ${String(current.status)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const stepError = (run: Json): string => String((run.steps as Json[])[0]!.error);

async function authorizationServer(...args: Parameters<typeof startAuthorizationServer>): Promise<AuthorizationServer> {
  const as = await startAuthorizationServer(...args);
  stops.push(as.stop);
  return as;
}

async function protectedMcp(as: AuthorizationServer, opts: Partial<ProtectedMcpOptions> = {}): Promise<ProtectedMcp> {
  const mcp = await startProtectedMcp({ issuer: as.issuer, jwksUrl: as.jwksUrl, metadataAt: "challenge", ...opts });
  stops.push(mcp.close);
  return mcp;
}

const methodsOf = (as: AuthorizationServer, clientId: string) => as.tokenRequests().filter((r) => r.clientId === clientId);

describe("token endpoint client authentication", () => {
  // Lists all three methods, as oidc-provider does by default.
  let everything: AuthorizationServer;
  beforeAll(async () => {
    everything = await authorizationServer();
  });

  it("client_secret_basic: the first the server lists, for a skill with a client secret", async () => {
    await everything.addClient({ clientId: "basic", method: "client_secret_basic", clientSecret: "basic-secret" });
    const mcp = await protectedMcp(everything);
    const skill = await createSkill(mcp.url, { issuer: everything.issuer, clientId: "basic", clientSecret: "basic-secret" });
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(await runEcho(skill.id as string, "hi")).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "hi" } });
    expect(mcp.toolCalls()).toBe(1);
    const seen = methodsOf(everything, "basic");
    expect(seen.length).toBeGreaterThan(0);
    expect(seen).toEqual(seen.map(() => ({ clientId: "basic", method: "client_secret_basic", resource: mcp.resource })));
  });

  it("client_secret_post: pinned, used although client_secret_basic is listed first", async () => {
    await everything.addClient({ clientId: "post", method: "client_secret_post", clientSecret: "post-secret" });
    const mcp = await protectedMcp(everything);
    const skill = await createSkill(mcp.url, {
      issuer: everything.issuer,
      clientId: "post",
      clientSecret: "post-secret",
      tokenEndpointAuthMethod: "TOKEN_ENDPOINT_AUTH_METHOD_CLIENT_SECRET_POST",
    });
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(await runEcho(skill.id as string, "posted")).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "posted" } });
    expect(new Set(methodsOf(everything, "post").map((r) => r.method))).toEqual(new Set(["client_secret_post"]));
  });

  it("client_secret_post: chosen when it is the only method the server lists", async () => {
    const postOnly = await authorizationServer({ methods: ["client_secret_post"] });
    await postOnly.addClient({ clientId: "post-only", method: "client_secret_post", clientSecret: "s3cret" });
    const mcp = await protectedMcp(postOnly);
    const skill = await createSkill(mcp.url, { issuer: postOnly.issuer, clientId: "post-only", clientSecret: "s3cret" });
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(new Set(methodsOf(postOnly, "post-only").map((r) => r.method))).toEqual(new Set(["client_secret_post"]));
  });

  it("client_secret_basic when the server's metadata lists no method (the RFC 8414 default)", async () => {
    const silent = await authorizationServer({ methods: ["client_secret_basic", "client_secret_post"], advertiseMethods: false });
    await silent.addClient({ clientId: "default", method: "client_secret_basic", clientSecret: "s3cret" });
    const mcp = await protectedMcp(silent);
    const skill = await createSkill(mcp.url, { issuer: silent.issuer, clientId: "default", clientSecret: "s3cret" });
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(new Set(methodsOf(silent, "default").map((r) => r.method))).toEqual(new Set(["client_secret_basic"]));
  });

  it.each([
    ["RS256", {}],
    // Pinned, with a client secret too: the pin wins over client_secret_basic.
    ["ES256", { tokenEndpointAuthMethod: "TOKEN_ENDPOINT_AUTH_METHOD_PRIVATE_KEY_JWT", clientSecret: "unused" }],
  ])("private_key_jwt with %s: a client assertion signed with the skill's key, whose public JWK the server registered", async (alg, extra) => {
    const clientId = `jwt-${alg}`;
    const mcp = await protectedMcp(everything);
    const created = await createSkill(mcp.url, { issuer: everything.issuer, clientId, signingAlg: alg, ...extra });
    // Not registered yet: the authorization server refuses, and says so.
    expect(created.toolsRefreshError).toContain("invalid_client");

    const { skill } = (await must("GetSkill", { id: created.id })) as { skill: { auth: { oauth: { publicJwk: Json } } } };
    const jwk = skill.auth.oauth.publicJwk;
    expect(jwk).toMatchObject({ alg, use: "sig", kid: expect.any(String) });
    expect(jwk).not.toHaveProperty("d");
    await everything.addClient({ clientId, method: "private_key_jwt", jwks: { keys: [jwk] } });

    const refreshed = (await must("RefreshSkillTools", { id: created.id })).skill as Json;
    expect(refreshed.toolsRefreshError).toBeUndefined();
    expect((refreshed.tools as Json[]).map((t) => t.name)).toEqual(["echo"]);
    expect(await runEcho(created.id as string, alg)).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: alg } });

    const accepted = methodsOf(everything, clientId).filter((r) => !r.error);
    expect(accepted.length).toBeGreaterThan(0);
    for (const { method, assertion } of accepted) {
      expect(method).toBe("private_key_jwt");
      expect(assertion!.header).toMatchObject({ alg, kid: jwk.kid });
      const { payload } = assertion!;
      // RFC 7523 §3 with draft-ietf-oauth-rfc7523bis: the issuer identifier, one value.
      expect(payload).toMatchObject({ iss: clientId, sub: clientId, aud: everything.issuer, jti: expect.any(String) });
      expect((payload.exp as number) - (payload.iat as number)).toBeLessThanOrEqual(60);
    }
    const jtis = accepted.map((r) => r.assertion!.payload.jti);
    expect(new Set(jtis).size).toBe(jtis.length);
  });

  it("private_key_jwt with the customer's own key: a PKCS#8 EC key without signing_alg is taken as ES256", async () => {
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const mcp = await protectedMcp(everything);
    const created = await createSkill(mcp.url, {
      issuer: everything.issuer,
      clientId: "own-key",
      privateKey: privateKey.export({ format: "pem", type: "pkcs8" }),
      tokenEndpointAuthMethod: "TOKEN_ENDPOINT_AUTH_METHOD_PRIVATE_KEY_JWT",
    });
    const jwk = (created.auth as { oauth: { publicJwk: Json } }).oauth.publicJwk;
    expect(jwk).toMatchObject({ alg: "ES256", kty: "EC", crv: "P-256" });
    await everything.addClient({ clientId: "own-key", method: "private_key_jwt", jwks: { keys: [jwk] } });
    expect(await runEcho(created.id as string, "own")).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "own" } });
    expect(methodsOf(everything, "own-key").map((r) => [r.method, r.assertion?.header.alg])).toContainEqual(["private_key_jwt", "ES256"]);
  });

  it("a pinned method the server does not list is tried, and the error says the server does not advertise it", async () => {
    const jwtOnly = await authorizationServer({ methods: ["private_key_jwt"] });
    const mcp = await protectedMcp(jwtOnly);
    const skill = await createSkill(mcp.url, {
      issuer: jwtOnly.issuer,
      clientId: "pinned-post",
      clientSecret: "s3cret",
      tokenEndpointAuthMethod: "TOKEN_ENDPOINT_AUTH_METHOD_CLIENT_SECRET_POST",
    });
    expect(skill.toolsRefreshError).toContain("skill_auth_failed (token request)");
    expect(skill.toolsRefreshError).toContain("invalid_client");
    expect(skill.toolsRefreshError).toContain("the authorization server does not advertise client_secret_post (it lists private_key_jwt)");
    // One request, refused (a provider configured without client_secret_post does not read the field).
    expect(jwtOnly.tokenRequests().map((r) => r.error)).toEqual(["invalid_client"]);
  });

  it("sends nothing when the server lists no method the skill has a credential for", async () => {
    const jwtOnly = await authorizationServer({ methods: ["private_key_jwt"] });
    const mcp = await protectedMcp(jwtOnly);
    const skill = await createSkill(mcp.url, { issuer: jwtOnly.issuer, clientId: "secret-only", clientSecret: "s3cret" });
    expect(skill.toolsRefreshError).toContain("skill_auth_failed (token request)");
    expect(skill.toolsRefreshError).toContain("the authorization server accepts private_key_jwt");
    expect(skill.toolsRefreshError).toContain("signing_alg");
    expect(jwtOnly.tokenRequests()).toEqual([]);
  });

  it("the authorization server's invalid_client and its description reach the skill, the run step and the probe", async () => {
    await everything.addClient({ clientId: "wrong", method: "client_secret_basic", clientSecret: "right-secret" });
    const mcp = await protectedMcp(everything);
    const skill = await createSkill(mcp.url, { issuer: everything.issuer, clientId: "wrong", clientSecret: "wrong-secret" });
    const reason = "(client_secret_basic) answered HTTP 401 invalid_client: client authentication failed";
    expect(skill.toolsRefreshError).toContain("skill_auth_failed (token request)");
    expect(skill.toolsRefreshError).toContain(reason);

    const run = await runEcho(skill.id as string, "x");
    expect(run.status).toBe("RUN_STATUS_FAILED");
    expect(stepError(run)).toContain(reason);

    const env = { AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8" };
    const args = ["skill", "probe", "--url", mcp.url, "--issuer", everything.issuer, "--client-id", "wrong"];
    const failed = await runCli([...args, "--client-secret", "wrong-secret"], env).then(
      () => undefined,
      (err: { stdout: string; stderr: string; code: number }) => err,
    );
    expect(failed).toMatchObject({ code: 1 });
    expect(failed!.stderr).toContain("probe failed: skill_auth_failed (token request)");
    expect(failed!.stderr).toContain(reason);

    const ok = await runCli([...args, "--client-secret", "right-secret"], env);
    expect(ok.stdout).toContain(`connected to ${mcp.url} (oauth); 1 tool(s):`);
    expect(ok.stdout).toContain("token requests: 1 (client_secret_basic)");
  });

  it("the probe authenticates with a private key file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "probe-key-"));
    try {
      const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
      const keyFile = join(dir, "key.pem");
      writeFileSync(keyFile, privateKey.export({ format: "pem", type: "pkcs8" }));
      const publicJwk = publicKey.export({ format: "jwk" });
      // The kid the probe prints and signs with: the RFC 7638 thumbprint.
      const kid = await calculateJwkThumbprint(publicJwk as JWK);
      await everything.addClient({ clientId: "probe-jwt", method: "private_key_jwt", jwks: { keys: [{ ...publicJwk, kid, alg: "ES256" }] } });
      const mcp = await protectedMcp(everything);
      const { stdout } = await runCli(
        ["skill", "probe", "--url", mcp.url, "--issuer", everything.issuer, "--client-id", "probe-jwt", "--private-key-file", keyFile],
        { AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8" },
      );
      expect(stdout).toContain(`private_key_jwt: ES256 key, kid ${kid}`);
      expect(stdout).toContain("token requests: 1 (private_key_jwt)");
      expect(methodsOf(everything, "probe-jwt").map((r) => [r.method, r.assertion?.header.alg, r.error])).toEqual([["private_key_jwt", "ES256", undefined]]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("protected resource metadata discovery", () => {
  let as: AuthorizationServer;
  beforeAll(async () => {
    as = await authorizationServer();
    await as.addClient({ clientId: "agentplane", method: "client_secret_basic", clientSecret: "s3cret" });
  });
  const oauth = () => ({ issuer: as.issuer, clientId: "agentplane", clientSecret: "s3cret" });

  const INSERTED = "/.well-known/oauth-protected-resource/mcp";
  const ROOT = "/.well-known/oauth-protected-resource";
  const SEED = "/mcp/.well-known/oauth-protected-resource";

  it.each([
    ["the challenge's resource_metadata", { metadataAt: "challenge" }, ["/metadata/prm.json"]],
    ["the path-inserted well-known URL", { metadataAt: "path-inserted" }, [INSERTED]],
    ["the root well-known URL", { metadataAt: "root" }, [INSERTED, ROOT]],
    ["the seed's {mcp_url}/.well-known/oauth-protected-resource", { metadataAt: "seed" }, [INSERTED, ROOT, SEED]],
    ["the path-inserted URL, also named by the challenge", { metadataAt: "path-inserted", challengeNamesMetadata: true }, [INSERTED]],
  ] as const)("finds metadata published only at %s, looking in the MCP specification's order", async (_where, opts, looked) => {
    const mcp = await protectedMcp(as, opts);
    const skill = await createSkill(mcp.url, oauth());
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(mcp.metadataRequests()).toEqual(looked);
    expect(await runEcho(skill.id as string, "found")).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "found" } });
  });

  it("takes a skill URL with a query as the resource without it", async () => {
    const mcp = await protectedMcp(as, { metadataAt: "path-inserted", query: "tenant=a" });
    expect(mcp.url).toMatch(/\/mcp\?tenant=a$/);
    const skill = await createSkill(mcp.url, oauth());
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(mcp.metadataRequests()).toEqual([INSERTED]);
    expect(as.tokenRequests().at(-1)).toMatchObject({ resource: mcp.resource, method: "client_secret_basic" });
    expect(await runEcho(skill.id as string, "q")).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "q" } });
  });

  it("accepts root metadata naming the whole origin as the resource, and asks for a token for it", async () => {
    const mcp = await protectedMcp(as, { metadataAt: "root", resourcePath: "/" });
    expect(mcp.resource).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const skill = await createSkill(mcp.url, oauth());
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(as.tokenRequests().at(-1)).toMatchObject({ resource: mcp.resource });
  });

  it("does not read a metadata document past 64 KiB", async () => {
    const mcp = await protectedMcp(as, { metadataAt: "challenge", metadataPadding: 100_000 });
    const skill = await createSkill(mcp.url, oauth());
    expect(skill.toolsRefreshError).toContain("skill_auth_failed (resource metadata)");
    expect(skill.toolsRefreshError).toContain(`${mcp.metadataUrl} is larger than 64 KiB`);
  });

  it("looks for the authorization server's metadata at the RFC 8414 and OpenID locations in the MCP specification's order", async () => {
    const tenant = await authorizationServer({ issuerPath: "/tenant1", metadataAt: ["oidc-appended"] });
    await tenant.addClient({ clientId: "agentplane", method: "client_secret_basic", clientSecret: "s3cret" });
    expect(tenant.issuer).toMatch(/\/tenant1$/);
    const mcp = await protectedMcp(tenant);
    const skill = await createSkill(mcp.url, { issuer: tenant.issuer, clientId: "agentplane", clientSecret: "s3cret" });
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(tenant.metadataRequests()).toEqual([
      "/.well-known/oauth-authorization-server/tenant1",
      "/.well-known/openid-configuration/tenant1",
      "/tenant1/.well-known/openid-configuration",
    ]);
  });
});

describe("servers built for MCP 2025-03-26: no protected resource metadata", () => {
  const PRM_LOCATIONS = ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource", "/mcp/.well-known/oauth-protected-resource"];

  async function legacyMcp(...args: Parameters<typeof startLegacyMcp>): Promise<LegacyMcp> {
    const mcp = await startLegacyMcp(...args);
    stops.push(mcp.as.stop);
    await mcp.as.addClient({ clientId: "agentplane", method: "client_secret_basic", clientSecret: "s3cret" });
    return mcp;
  }

  it("takes the token endpoint from the authorization server metadata at the server's own origin", async () => {
    const mcp = await legacyMcp({ asMetadata: true });
    const skill = await createSkill(mcp.url, { issuer: mcp.as.issuer, clientId: "agentplane", clientSecret: "s3cret", scopes: [MCP_SCOPE] });
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(mcp.as.metadataRequests()).toEqual([...PRM_LOCATIONS, "/.well-known/oauth-authorization-server"]);
    expect(mcp.as.tokenRequests().at(-1)).toMatchObject({ method: "client_secret_basic", resource: mcp.url });
    expect(await runEcho(skill.id as string, "legacy")).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "legacy" } });
    expect(mcp.toolCalls()).toBe(1);
  });

  it("uses the revision's default token endpoint, <origin>/token, when the server publishes no metadata at all", async () => {
    const mcp = await legacyMcp({ asMetadata: false });
    const skill = await createSkill(mcp.url, { issuer: mcp.as.issuer, clientId: "agentplane", clientSecret: "s3cret", scopes: [MCP_SCOPE] });
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(mcp.as.metadataRequests()).toEqual([...PRM_LOCATIONS, "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]);
    expect(mcp.as.tokenRequests().at(-1)).toMatchObject({ method: "client_secret_basic", resource: mcp.url });
    expect(await runEcho(skill.id as string, "defaults")).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "defaults" } });
  });

  it("asks the configured issuer, elsewhere, when the server advertises no authorization server", async () => {
    const as = await authorizationServer();
    await as.addClient({ clientId: "agentplane", method: "client_secret_basic", clientSecret: "s3cret" });
    const mcp = await protectedMcp(as, { metadataAt: "none" });
    const skill = await createSkill(mcp.url, { issuer: as.issuer, clientId: "agentplane", clientSecret: "s3cret", scopes: [MCP_SCOPE] });
    expect(skill.toolsRefreshError).toBeUndefined();
    expect(mcp.metadataRequests()).toEqual(PRM_LOCATIONS);
    expect(as.tokenRequests().at(-1)).toMatchObject({ clientId: "agentplane", resource: mcp.resource });
  });

  it("sends nothing, and says where it looked, when neither the server nor another issuer has metadata", async () => {
    const mcp = await legacyMcp({ asMetadata: false });
    const elsewhere = await legacyMcp({ asMetadata: false });
    const skill = await createSkill(mcp.url, { issuer: elsewhere.as.issuer, clientId: "agentplane", clientSecret: "s3cret" });
    expect(skill.toolsRefreshError).toContain("skill_auth_failed (authorization server metadata)");
    expect(skill.toolsRefreshError).toContain(`no metadata for issuer ${elsewhere.as.issuer}`);
    expect(skill.toolsRefreshError).toContain(`and no protected resource metadata: ${mcp.as.issuer}/.well-known/oauth-protected-resource/mcp HTTP 404`);
    expect([...mcp.as.tokenRequests(), ...elsewhere.as.tokenRequests()]).toEqual([]);
  });
});

describe("a server's 403", () => {
  let as: AuthorizationServer;
  beforeAll(async () => {
    as = await authorizationServer();
    await as.addClient({ clientId: "agentplane", method: "client_secret_basic", clientSecret: "s3cret" });
  });
  const oauth = () => ({ issuer: as.issuer, clientId: "agentplane", clientSecret: "s3cret" });

  it("shows the status and the JSON-RPC error's message", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "tenant acme is suspended" }, id: null });
    const mcp = await protectedMcp(as, { forbid: { status: 403, headers: { "content-type": "application/json" }, body } });
    const skill = await createSkill(mcp.url, oauth());
    const reason = "HTTP 403 (JSON-RPC error -32001: tenant acme is suspended)";
    expect(skill.toolsRefreshError).toBe(`skill_unauthorized: the server refused the request: ${reason}`);
    const run = await runEcho(skill.id as string, "x");
    expect(stepError(run)).toBe(`skill_unauthorized: the server refused the request: ${reason}`);
  });

  it("shows the status and the WWW-Authenticate error and description, never the body", async () => {
    const mcp = await protectedMcp(as, {
      forbid: {
        status: 403,
        headers: { "www-authenticate": 'Bearer error="access_denied", error_description="organization acme may not use this server"', "content-type": "text/plain" },
        body: "internal: policy engine at 10.0.0.7 said no (key sk-live-123)",
      },
    });
    const skill = await createSkill(mcp.url, oauth());
    expect(skill.toolsRefreshError).toBe(
      "skill_unauthorized: the server refused the request: HTTP 403 (access_denied: organization acme may not use this server)",
    );
    expect(skill.toolsRefreshError).not.toContain("sk-live");
  });
});
