// `agentplane serve --role api|worker|all` as an operator runs it (the built
// binary): an api process only queues runs, a worker process on the same
// SQLite file executes them, and `all` executes runs in worker threads that
// a cancel through the API and a SIGTERM still reach.
import { join } from "node:path";
import Database from "better-sqlite3";
import { freeLoopbackPort } from "./support/listen.js";
import { startSigningIdp, type SigningIdp } from "./support/jwks-server.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { PATIENCE_MS, sleep, waitFor } from "./support/wait.js";
import { CliProcess, DataDirs, runCli, ServeProcess, serveEnv } from "./support/cli-process.js";

const ISSUER = "https://idp.roles.test";
const AUDIENCE = "https://api.roles.test";
const OPERATOR = "ops";

let idp: SigningIdp;
let token: string;
let customer: CustomerMcp;
const dirs = new DataDirs("agentplane-roles-");

// One `agentplane serve` process with `args` on a data dir.
class Serve extends ServeProcess {
  constructor(dataDir: string, port: number, args: string[], env: Record<string, string> = {}) {
    super(args, { ...serveEnv(dataDir, idp), AGENTPLANE_LOG_LEVEL: "info", ...env }, port, { token, tenant: "acme" });
  }
}

// A data dir with tenant acme (admin: the operator) created by the CLI.
const dataDir = () => dirs.withTenant("acme", OPERATOR);

interface Run {
  id: string;
  status: string;
}

// Creates the customer skill and an agent whose one step calls `tool`.
async function agentCalling(api: Serve, tool: string, args: string): Promise<string> {
  const { skill } = await api.call<{ skill: { id: string } }>("CreateSkill", { skill: { name: `tools-${tool}`, mcpUrl: customer.url } });
  const { agent } = await api.call<{ agent: { id: string } }>("CreateAgent", {
    agent: { name: `calls-${tool}`, skillIds: [skill.id], steps: [{ skillId: skill.id, tool, arguments: args }] },
  });
  return agent.id;
}

const runAgent = async (api: Serve, agentId: string) => (await api.call<{ run: Run }>("RunAgent", { id: agentId })).run;
const getRun = async (api: Serve, id: string) => (await api.call<{ run: Run }>("GetRun", { id })).run;

function storedRun(dir: string, id: string): { status: string; lease_owner: string | null } {
  const db = new Database(join(dir, "agentplane.db"), { readonly: true, fileMustExist: true });
  try {
    return db.prepare<[string], { status: string; lease_owner: string | null }>("select status, lease_owner from runs where id = ?").get(id)!;
  } finally {
    db.close();
  }
}

const runStatus = (api: Serve, id: string, status: string, timeoutMs: number) =>
  waitFor(`run ${id} to be ${status}`, timeoutMs, async () => ((await getRun(api, id)).status === status ? true : undefined), 50);

beforeAll(async () => {
  idp = await startSigningIdp(ISSUER, AUDIENCE);
  token = await idp.sign(OPERATOR, { client_id: OPERATOR });
  customer = await startOpenMcp();
});

afterAll(async () => {
  await CliProcess.killAll();
  await customer?.close();
  await idp?.close();
  dirs.removeAll();
});

describe("agentplane serve --role", () => {
  it("api queues runs without executing them; a worker process on the same database executes them", async () => {
    const dir = await dataDir();
    const api = new Serve(dir, await freeLoopbackPort(), ["--role", "api"]);
    await api.ready("agentplane serve to be ready");
    const agentId = await agentCalling(api, "echo", '{"text": "hi"}');
    const run = await runAgent(api, agentId);
    expect(run.status).toBe("RUN_STATUS_QUEUED");
    await sleep(1500);
    expect((await getRun(api, run.id)).status).toBe("RUN_STATUS_QUEUED");
    expect(customer.toolCalls().filter((c) => c.name === "echo")).toEqual([]);

    // AGENTPLANE_ROLE selects the role as well as the flag does.
    const worker = new Serve(dir, await freeLoopbackPort(), [], { AGENTPLANE_ROLE: "worker" });
    await worker.ready("agentplane serve to be ready");
    // Health only: the worker serves none of the API.
    expect((await fetch(`${worker.url}/platform.v1.PlatformService/ListAgents`, { method: "POST", body: "{}" })).status).toBe(404);
    expect((await fetch(`${worker.url}/api/v1/agents`)).status).toBe(404);
    expect((await fetch(`${worker.url}/healthz`)).status).toBe(200);

    await runStatus(api, run.id, "RUN_STATUS_SUCCEEDED", PATIENCE_MS);
    expect(storedRun(dir, run.id).status).toBe("succeeded");
    expect(customer.toolCalls().filter((c) => c.name === "echo")).toEqual([{ name: "echo", arguments: { text: "hi" } }]);
    await Promise.all([api.stop(), worker.stop()]);
    expect([api.exitCode, worker.exitCode]).toEqual([0, 0]);
  });

  it("all executes runs in worker threads, and a cancel through the API aborts a run executing in one at once", async () => {
    const dir = await dataDir();
    // One run at a time per thread, two threads: the cancelled run's thread
    // must take the next run right away, not at its next lease heartbeat or
    // idle poll. Both are put past this test's timeout (a heartbeat every
    // 200 s, a poll every 600 s), so the next run succeeding at all shows it,
    // whatever the machine's load.
    const serve = new Serve(dir, await freeLoopbackPort(), [], {
      AGENTPLANE_WORKER_THREADS: "2",
      AGENTPLANE_WORKER_CONCURRENCY: "1",
      AGENTPLANE_RUN_LEASE_SECONDS: "600",
      AGENTPLANE_WORKER_IDLE_POLL_SECONDS: "600",
    });
    await serve.ready("agentplane serve to be ready");
    expect(serve.output).toContain("runs execute in 2 worker threads");
    const slow = await agentCalling(serve, "slow", '{"ms": 60000}');
    const quick = await agentCalling(serve, "echo", '{"text": "after"}');

    const long = [await runAgent(serve, slow), await runAgent(serve, slow)];
    for (const r of long) await runStatus(serve, r.id, "RUN_STATUS_RUNNING", 30_000);
    const next = await runAgent(serve, quick);
    await sleep(300);
    expect((await getRun(serve, next.id)).status).toBe("RUN_STATUS_QUEUED");

    const { run: cancelled } = await serve.call<{ run: Run }>("CancelRun", { id: long[0]!.id });
    expect(cancelled.status).toBe("RUN_STATUS_CANCELLED");
    await runStatus(serve, next.id, "RUN_STATUS_SUCCEEDED", PATIENCE_MS);

    await serve.call("CancelRun", { id: long[1]!.id });
    await serve.stop();
    expect(serve.exitCode).toBe(0);
  });

  it("SIGTERM lets a run in flight in a worker thread finish, then exits", async () => {
    const dir = await dataDir();
    const serve = new Serve(dir, await freeLoopbackPort(), ["--role", "all"], { AGENTPLANE_WORKER_THREADS: "1" });
    await serve.ready("agentplane serve to be ready");
    // The step is held until the process is shutting down: the run is in
    // flight at the SIGTERM whatever the machine's load (a 1.5 s step could
    // end before a loaded poll saw it running).
    const release = customer.holdTrackKey("sigterm");
    const agentId = await agentCalling(serve, "track", '{"key": "sigterm", "ms": 0}');
    const run = await runAgent(serve, agentId);
    await runStatus(serve, run.id, "RUN_STATUS_RUNNING", 30_000);
    serve.child.kill("SIGTERM");
    await waitFor("serve to be shutting down", 30_000, () => (serve.output.includes("shutting down") ? true : undefined));
    release();
    await serve.exit;
    expect(serve.exitCode).toBe(0);
    expect(storedRun(dir, run.id)).toEqual({ status: "succeeded", lease_owner: null });
    expect(serve.output).toContain("shutting down");
  });

  it("refuses an unknown role, naming the choices", async () => {
    const dir = await dataDir();
    const res = await runCli(["serve", "--role", "both"], { AGENTPLANE_DATA_DIR: dir, AGENTPLANE_AUTH_MODE: "jwt", AGENTPLANE_JWT_ISSUER: ISSUER, AGENTPLANE_JWT_AUDIENCE: AUDIENCE }).then(
      () => ({ code: 0, stderr: "" }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('AGENTPLANE_ROLE (or --role) must be api, worker or all, got "both"');
  });
});
