// The TypeScript client package (clients/typescript) as another service uses
// it: a client-credentials token from a real OAuth server (oidc-provider),
// found through its metadata and replaced before it expires; the tenant
// header on every call; each protocol the server speaks; and the package's
// example programs, built by `make build`, run against a live server.
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { ClientCredentials, createPlatformClient, type Protocol } from "../clients/typescript/src/index.js";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

const AUD = "https://api.agentplane.test";
const SCOPE = "platform:read platform:write";
const TTL_SECONDS = 300;
const EXAMPLES = join(process.cwd(), "clients/typescript/dist/examples");
const exec = promisify(execFile);

let idp: TestIdp;
let server: TestServer;
let agentId: string;

beforeAll(async () => {
  if (!existsSync(join(EXAMPLES, "run-agent.js"))) throw new Error("clients/typescript is not built: run make build");
  idp = await startIdp({
    clients: [{ clientId: "billing-service", clientSecret: "billing-secret", scope: SCOPE }],
    scopes: ["platform:read", "platform:write"],
    audience: AUD,
    accessTokenFormat: "jwt",
    accessTokenTtlSeconds: TTL_SECONDS,
  });
  server = await startServer({
    authenticator: createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 }),
    runtime: {},
  });
  await server.seedTenant("acme", [{ subject: "billing-service", role: "admin" }]);
  await server.seedTenant("globex");
  const client = createPlatformClient({ baseUrl: server.url, tenant: "acme", tokens: credentials() });
  ({ agent: { id: agentId } = { id: "" } } = await client.createAgent({ agent: { name: "greeter", description: "says hello", model: PLACEHOLDER_MODEL } }));
});
afterAll(async () => {
  await server?.close();
  await idp?.stop();
});

// Client credentials as a service configures them: the issuer, its id and
// secret; the clock and the token endpoint's requests are the test's.
function credentials(extra: { now?: () => number; onToken?: (res: Response) => Promise<Response> | Response } = {}) {
  const requests: string[] = [];
  const tokens = new ClientCredentials({
    issuer: idp.issuer,
    clientId: "billing-service",
    clientSecret: "billing-secret",
    scope: SCOPE,
    now: extra.now,
    fetch: async (input, init) => {
      const url = String(input);
      requests.push(url);
      const res = await fetch(input, init);
      return url === idp.tokenEndpoint && extra.onToken ? extra.onToken(res) : res;
    },
  });
  return Object.assign(tokens, { tokenRequests: () => requests.filter((u) => u === idp.tokenEndpoint).length, requests });
}

test("the package exports every generated message file", () => {
  const index = readFileSync("clients/typescript/src/index.ts", "utf8");
  const generated = readdirSync("gen/platform/v1").filter((f) => f.endsWith("_pb.ts"));
  expect(generated.length).toBeGreaterThan(5);
  for (const file of generated) expect(index).toContain(`export * from "./gen/platform/v1/${file.replace(/\.ts$/, ".js")}";`);
});

describe("client credentials", () => {
  it("finds the token endpoint in the issuer's metadata (OpenID discovery when RFC 8414 has none) and fetches one token for many calls", async () => {
    const tokens = credentials();
    const client = createPlatformClient({ baseUrl: server.url, tenant: "acme", tokens });
    const [a, b] = await Promise.all([client.listAgents({}), client.listAgents({})]);
    await client.getAgent({ id: agentId });
    expect(a.agents.map((x) => x.id)).toEqual([agentId]);
    expect(b.agents.map((x) => x.id)).toEqual([agentId]);
    expect(tokens.requests).toEqual([
      `${idp.issuer}/.well-known/oauth-authorization-server`,
      `${idp.issuer}/.well-known/openid-configuration`,
      idp.tokenEndpoint,
    ]);
  });

  it("replaces the token a minute before it expires, and not earlier", async () => {
    let now = Date.now();
    const tokens = credentials({ now: () => now });
    const first = await tokens.token();
    now += (TTL_SECONDS - 61) * 1000;
    expect(await tokens.token()).toBe(first);
    expect(tokens.tokenRequests()).toBe(1);
    now += 2000;
    // Good for 59 s more: this call goes on with it while the new one is fetched.
    expect(await tokens.token()).toBe(first);
    const second = await waitFor("the new token", 10_000, async () => {
      const token = await tokens.token();
      return token === first ? undefined : token;
    });
    expect(tokens.tokenRequests()).toBe(2);
    // The new token is one the API takes.
    const client = createPlatformClient({ baseUrl: server.url, tenant: "acme", tokens });
    await expect(client.listAgents({})).resolves.toBeDefined();
    expect(await tokens.token()).toBe(second);
    expect(tokens.tokenRequests()).toBe(2);
  });

  it("keeps using the token it holds while the token endpoint is down, until that token expires", async () => {
    let now = Date.now();
    const tokens = credentials({ now: () => now });
    const held = await tokens.token();
    idp.setDown(true);
    try {
      now += (TTL_SECONDS - 30) * 1000;
      expect(await tokens.token()).toBe(held);
      expect(await tokens.token()).toBe(held);
      now += 31_000;
      await expect(tokens.token()).rejects.toThrow(/fetch failed/);
    } finally {
      idp.setDown(false);
    }
    expect(await tokens.token()).not.toBe(held);
  });

  it("drops a token the API refuses, so the next call gets a new one", async () => {
    let answered = 0;
    const tokens = credentials({
      // The first answer is a token the API does not take.
      onToken: (res) => (answered++ === 0 ? Response.json({ access_token: "not-a-token", token_type: "Bearer", expires_in: TTL_SECONDS }) : res),
    });
    const client = createPlatformClient({ baseUrl: server.url, tenant: "acme", tokens });
    const refused = await client.listAgents({}).catch((e: unknown) => ConnectError.from(e));
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.Unauthenticated);
    expect((await client.listAgents({})).agents.map((a) => a.id)).toEqual([agentId]);
    expect(tokens.tokenRequests()).toBe(2);
  });

  it("says what the token endpoint answered when it refuses the client, without the secret", async () => {
    const tokens = new ClientCredentials({ tokenEndpoint: idp.tokenEndpoint, clientId: "billing-service", clientSecret: "wrong-secret", scope: SCOPE });
    const err = (await tokens.token().catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(new RegExp(`^token request to ${idp.tokenEndpoint} failed \\(HTTP 401\\): invalid_client`));
    expect(err.message).not.toContain("wrong-secret");
  });
});

describe("the tenant header", () => {
  it("names the client's tenant on every call; a call may name another", async () => {
    const client = createPlatformClient({ baseUrl: server.url, tenant: "globex", tokens: credentials() });
    const refused = await client.listAgents({}).catch((e: unknown) => ConnectError.from(e));
    expect((refused as ConnectError).code).toBe(Code.PermissionDenied);
    const { agents } = await client.listAgents({}, { headers: { "x-platform-tenant": "acme" } });
    expect(agents.map((a) => a.tenant)).toEqual(["acme"]);
  });

  it.each<Protocol>(["connect", "grpc", "grpc-web"])("carries the token and the tenant over %s", async (protocol) => {
    const client = createPlatformClient({ baseUrl: server.url, tenant: "acme", tokens: credentials(), protocol });
    const { run } = await client.runAgent({ id: agentId });
    expect(run?.tenant).toBe("acme");
    const runs = [];
    for await (const { run: current } of client.watchRun({ id: run!.id })) runs.push(current!);
    expect(runs.at(-1)?.id).toBe(run!.id);
  });
});

describe("the example programs", () => {
  const env = (tenant: string) => ({
    PATH: process.env.PATH ?? "",
    AGENTPLANE_URL: server.url,
    AGENTPLANE_TENANT: tenant,
    AGENTPLANE_ISSUER: idp.issuer,
    AGENTPLANE_CLIENT_ID: "billing-service",
    AGENTPLANE_CLIENT_SECRET: "billing-secret",
    AGENTPLANE_SCOPE: SCOPE,
  });
  const example = (name: string, args: string[], tenant = "acme") =>
    exec(process.execPath, [join(EXAMPLES, `${name}.js`), ...args], { env: env(tenant) }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );

  it("list-agents prints the tenant's agents", async () => {
    const res = await example("list-agents", []);
    expect(res).toEqual({ code: 0, stdout: `${agentId}  greeter\n`, stderr: "" });
  });

  it("run-agent runs an agent by name with an input and follows the run to its end", async () => {
    const res = await example("run-agent", ["greeter", '{"name": "Ada"}']);
    expect(res.stderr).toBe("");
    const [queued, ended] = res.stdout.trim().split("\n");
    const runId = /^run (run_\S+) queued$/.exec(queued!)?.[1];
    expect(runId).toBeDefined();
    expect(ended).toBe(`run ${runId} succeeded: {"ok":true}`);
    expect(res.code).toBe(0);
    const client = createPlatformClient({ baseUrl: server.url, tenant: "acme", tokens: credentials() });
    const { run } = await client.getRun({ id: runId! });
    expect(run?.agentId).toBe(agentId);
    expect(toJson(ValueSchema, run!.input!)).toEqual({ name: "Ada" });
  });

  it("run-agent says why a tenant the client is not a member of refuses it", async () => {
    const res = await example("run-agent", ["greeter"], "globex");
    expect(res.code).toBe(1);
    expect(res.stdout).toBe("");
    expect(res.stderr).toMatch(/^PermissionDenied: /);
  });
});
