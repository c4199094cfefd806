// Generated Connect clients over each protocol the server speaks on its one
// port: Connect (JSON and binary), gRPC over h2c, gRPC-Web; and the real
// `buf curl` CLI as a user would run it.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { PlatformService } from "../gen/platform/v1/platform_service_pb.js";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

const AUD = "https://api.agentplane.test";
const run = promisify(execFile);

describe("generated clients and buf curl", () => {
  let idp: TestIdp;
  let server: TestServer;
  let token: string;

  beforeAll(async () => {
    idp = await startIdp({
      clients: [{ clientId: "ops", clientSecret: "ops-secret", scope: "platform:read platform:write" }],
      scopes: ["platform:read", "platform:write"],
      audience: AUD,
      accessTokenFormat: "jwt",
    });
    server = await startServer({
      authenticator: createAuthenticator({
        mode: "jwt",
        issuer: idp.issuer,
        audience: AUD,
        algorithms: ["RS256"],
        clockToleranceSeconds: 60,
      }),
    });
    await server.seedTenant("acme", [{ subject: "ops", role: "admin" }]);
    token = await idp.token("ops", "platform:read platform:write");
  });
  afterAll(async () => {
    await server.close();
    await idp.stop();
  });

  const headers = () => ({ authorization: `Bearer ${token}`, "x-platform-tenant": "acme" });
  const transports: [string, () => Transport][] = [
    ["connect+json", () => createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: false })],
    ["connect+proto", () => createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: true })],
    ["grpc (h2c)", () => createGrpcTransport({ baseUrl: server.url })],
    ["grpc-web", () => createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" })],
  ];

  it("takes an empty Value as no input: a binary client's RunAgent with `input: {}` queues a run, not an internal error", async () => {
    const client = createClient(PlatformService, transports[1]![1]());
    const { agent } = await client.createAgent({ agent: { name: "empty input", description: "d", model: PLACEHOLDER_MODEL } }, { headers: headers() });
    const { run } = await client.runAgent({ id: agent!.id, input: {} }, { headers: headers() });
    expect(run?.id).toMatch(/^run_/);
    expect(run?.input).toBeUndefined();
  });

  it.each(transports)("creates and lists agents over %s", async (name, transport) => {
    const client = createClient(PlatformService, transport());
    const { agent } = await client.createAgent({ agent: { name: `via ${name}`, description: "d", model: PLACEHOLDER_MODEL } }, { headers: headers() });
    expect(agent?.id).toMatch(/^agt_/);
    expect(agent?.tenant).toBe("acme");
    const { agents } = await client.listAgents({}, { headers: headers() });
    expect(agents.map((a) => a.id)).toContain(agent!.id);
    expect(agents[0]!.id).toBe(agent!.id); // newest first
  });

  it.each(transports)("reports a missing token as unauthenticated over %s", async (_name, transport) => {
    const client = createClient(PlatformService, transport());
    const err = await client.listAgents({}, { headers: { "x-platform-tenant": "acme" } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
  });

  const bufCurl = (extra: string[]) =>
    run("node_modules/.bin/buf", [
      "curl",
      "--schema",
      "proto",
      "--header",
      "X-Platform-Tenant: acme",
      ...extra,
      "--data",
      "{}",
      `${server.url}/platform.v1.PlatformService/ListAgents`,
    ]).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );

  it("answers buf curl with a token", async () => {
    const res = await bufCurl(["--header", `Authorization: Bearer ${token}`]);
    expect(res.code).toBe(0);
    const body = JSON.parse(res.stdout) as { agents: { tenant: string }[] };
    expect(body.agents.length).toBeGreaterThan(0);
    expect(body.agents.every((a) => a.tenant === "acme")).toBe(true);
  });

  it("refuses buf curl without a token", async () => {
    const res = await bufCurl([]);
    expect(res.code).not.toBe(0);
    expect(JSON.parse(res.stdout || res.stderr)).toEqual({ code: "unauthenticated", message: "missing bearer token" });
  });
});
