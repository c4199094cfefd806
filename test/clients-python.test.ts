// A Python service calling agentplane over gRPC (cleartext HTTP/2) with stubs
// generated from proto/ by Debian's protoc and grpc_python_plugin, run by
// Debian's python3 with python3-grpcio and python3-protobuf (`make test`
// installs them when missing): ListAgents and RunAgent with a bearer token
// from a real OAuth server and the tenant as metadata, then WatchRun.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { connectMust, startServer, type TestServer } from "./support/server.js";

const AUD = "https://api.agentplane.test";
const SCOPE = "platform:read platform:write";
// Debian's, where python3-grpcio and python3-protobuf are installed.
const PYTHON = "/usr/bin/python3";
const exec = promisify(execFile);

let idp: TestIdp;
let server: TestServer;
let token: string;
let agentId: string;
let out: string;

const run = (file: string, args: string[], env: Record<string, string> = {}) =>
  exec(file, args, { env: { PATH: process.env.PATH ?? "", ...env } }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

beforeAll(async () => {
  out = mkdtempSync(join(tmpdir(), "agentplane-python-"));
  idp = await startIdp({
    clients: [{ clientId: "reports-service", clientSecret: "reports-secret", scope: SCOPE }],
    scopes: ["platform:read", "platform:write"],
    audience: AUD,
    accessTokenFormat: "jwt",
  });
  server = await startServer({
    authenticator: createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 }),
    runtime: {},
  });
  await server.seedTenant("acme", [{ subject: "reports-service", role: "admin" }]);
  await server.seedTenant("globex");
  token = await idp.token("reports-service", SCOPE);
  const created = await connectMust(
    server,
    "CreateAgent",
    { agent: { name: "summarizer", description: "d", model: PLACEHOLDER_MODEL } },
    { authorization: `Bearer ${token}`, "x-platform-tenant": "acme" },
  );
  agentId = (created.agent as { id: string }).id;
});
afterAll(async () => {
  await server?.close();
  await idp?.stop();
  rmSync(out, { recursive: true, force: true });
});

it("generated as is, the stubs do not import: platform.v1 lands in the standard library's `platform`", async () => {
  const plain = join(out, "plain");
  await run("mkdir", ["-p", plain]);
  const gen = await run("protoc", ["-I", "proto", `--python_out=${plain}`, ...["agent", "options"].map((f) => `proto/platform/v1/${f}.proto`)]);
  expect(gen).toEqual({ code: 0, stdout: "", stderr: "" });
  const res = await run(PYTHON, ["-c", "import platform.v1.agent_pb2"], { PYTHONPATH: plain });
  expect(res.code).toBe(1);
  expect(res.stderr).toContain("No module named 'platform.v1'; 'platform' is not a package");
});

describe("stubs generated under a package of the user's choosing", () => {
  const env = (tenant: string) => ({
    PYTHONPATH: join(out, "generated"),
    AGENTPLANE_URL: server.url,
    AGENTPLANE_TENANT: tenant,
    AGENTPLANE_ISSUER: idp.issuer,
    AGENTPLANE_CLIENT_ID: "reports-service",
    AGENTPLANE_CLIENT_SECRET: "reports-secret",
    AGENTPLANE_SCOPE: SCOPE,
  });
  const runAgent = (args: string[], tenant = "acme") => run(PYTHON, ["clients/python/examples/run_agent.py", ...args], env(tenant));

  beforeAll(async () => {
    const gen = await run("clients/python/generate.sh", [join(out, "generated"), "agentplane_api"]);
    expect(gen).toEqual({ code: 0, stdout: "", stderr: "" });
  });

  it("run_agent.py lists the agents, runs one with an input and follows the run over gRPC", async () => {
    const res = await runAgent(["summarizer", '{"report": "q3"}']);
    expect(res.stderr).toBe("");
    const [queued, ended] = res.stdout.trim().split("\n");
    const runId = /^run (run_\S+) queued$/.exec(queued!)?.[1];
    expect(runId).toBeDefined();
    expect(ended).toBe(`run ${runId} succeeded: {"ok":true}`);
    expect(res.code).toBe(0);
    const { run: stored } = await connectMust(server, "GetRun", { id: runId }, { authorization: `Bearer ${token}`, "x-platform-tenant": "acme" });
    expect(stored).toMatchObject({ agentId, input: { report: "q3" } });
  });

  it("sends the tenant as metadata: a tenant the client is not a member of refuses it", async () => {
    const res = await runAgent(["summarizer"], "globex");
    expect(res.code).toBe(1);
    expect(res.stdout).toBe("");
    expect(res.stderr).toMatch(/^PERMISSION_DENIED: /);
  });

  it("sends the bearer token: a client the issuer does not know gets no token and makes no call", async () => {
    const res = await run(PYTHON, ["clients/python/examples/run_agent.py", "summarizer"], { ...env("acme"), AGENTPLANE_CLIENT_SECRET: "wrong" });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(new RegExp(`^token request to ${idp.tokenEndpoint} failed \\(HTTP 401\\): invalid_client: [^\\n]+\\n$`));
  });
});
