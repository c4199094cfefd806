// Runs execute in worker threads by default: their lifecycle lines reach the
// process's stdout with the same fields as on the HTTP thread, plus the
// thread, as JSON when stdout is not a terminal. The built CLI
// (`agentplane dev`), as `make run` starts it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CliProcess, platformCall } from "./support/cli-process.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { freeLoopbackPort } from "./support/listen.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;

let dir: string;
let dev: CliProcess;
let mcp: CustomerMcp;
let token: string;

const call = (method: string, body: unknown) => platformCall<Json>(dev, { token, tenant: "dev" }, method, body);

// The JSON lines of stdout and stderr (the banner is not one).
const lines = () =>
  dev.output
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Json);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentplane-logs-"));
  mcp = await startOpenMcp();
  dev = new CliProcess(
    ["dev"],
    { AGENTPLANE_DATA_DIR: dir, AGENTPLANE_WORKER_THREADS: "1", AGENTPLANE_LOG_LEVEL: "debug", AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8" },
    await freeLoopbackPort(),
  );
  token = await dev.devClientToken(await dev.devClient());
});

afterAll(async () => {
  await dev?.kill();
  await mcp?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("a run's lines from its worker thread carry the thread and the same ids, as JSON lines on stdout", async () => {
  const skill = ((await call("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
  const agent = ((await call("CreateAgent", { agent: { name: "fails", skillIds: [skill], steps: [{ skillId: skill, tool: "fail", arguments: "" }] } })).agent as Json)
    .id as string;
  const run = ((await call("RunAgent", { id: agent, input: {} })).run as Json).id as string;
  const finished = await waitFor("the run's finished line", 15_000, () => lines().find((l) => l.msg === "run finished" && l.run === run));
  const tenant = ((await call("GetRun", { id: run })).run as Json).tenant;
  expect(tenant).toBe("dev");
  expect(finished).toMatchObject({ level: 40, thread: 0, run, agent, tenantSlug: "dev", status: "failed", kind: "tool_error", attempts: 1 });
  expect(lines().find((l) => l.msg === "run started" && l.run === run)).toMatchObject({ level: 30, thread: 0, attempt: 1, worker: expect.stringMatching(/^worker-/) });
  expect(lines().find((l) => l.msg === "run step failed" && l.run === run)).toMatchObject({ thread: 0, kind: "tool_error", tool: "fail" });
  // Queued on the HTTP thread, which has no thread field.
  expect(lines().find((l) => l.msg === "run queued" && l.run === run)).toMatchObject({ via: "run_agent", agent });
  expect(lines().find((l) => l.msg === "run queued" && l.run === run)).not.toHaveProperty("thread");
  // The access line of the RunAgent call, and no credential anywhere.
  expect(lines().find((l) => l.msg === "request" && l.route === "/platform.v1.PlatformService/RunAgent")).toMatchObject({ status: 200, tenantSlug: "dev" });
  expect(dev.output).not.toContain(token);
});
