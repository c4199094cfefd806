// `agentplane dev` as `make run` starts it (the built binary): a skill on
// 127.0.0.1 works without configuration, the banner's webhook curl works and
// survives a restart, while `serve` keeps refusing loopback.
import { execFile } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { CliProcess, DataDirs, jwtEnv } from "./support/cli-process.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { startSigningIdp, type SigningIdp } from "./support/jwks-server.js";
import { freeLoopbackPort } from "./support/listen.js";
import { PATIENCE_MS, waitFor } from "./support/wait.js";

const exec = promisify(execFile);
type Json = Record<string, unknown>;

let customer: CustomerMcp;
let idp: SigningIdp;
const dirs = new DataDirs("agentplane-dev-mode-");

beforeAll(async () => {
  customer = await startOpenMcp();
});

afterAll(async () => {
  await CliProcess.killAll();
  await customer?.close();
  await idp?.close();
  dirs.removeAll();
});

async function startDev(dir: string, env: Record<string, string> = {}): Promise<CliProcess> {
  const dev = new CliProcess(["dev"], { AGENTPLANE_DATA_DIR: dir, AGENTPLANE_WORKER_THREADS: "1", AGENTPLANE_LOG_LEVEL: "warn", ...env }, await freeLoopbackPort());
  // The banner is printed once the dev tenant and source exist.
  await dev.ready("agentplane dev", () => (dev.output.includes("Guide: docs/guide/") ? true : undefined));
  return dev;
}

// The first quoted JSON body after `-d '` on the banner line starting with `prefix`.
function bannerLine(dev: CliProcess, prefix: string): string {
  const line = dev.output.split("\n").find((l) => l.trimStart().startsWith(prefix));
  if (!line) throw new Error(`no banner line "${prefix}" in:\n${dev.output}`);
  return line;
}

async function devToken(dev: CliProcess): Promise<string> {
  const body = /-d '([^']+)'/.exec(bannerLine(dev, "TOKEN=$(curl"))![1]!;
  const res = await fetch(`${dev.url}/oauth/token`, { method: "POST", headers: { "content-type": "application/json" }, body });
  return ((await res.json()) as { access_token: string }).access_token;
}

async function api(base: string, token: string, method: string, path: string, body?: unknown, tenant = "dev") {
  const res = await fetch(`${base}/api/v1/${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "x-platform-tenant": tenant, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as Json };
}

// Runs the skill's echo tool in a one-step agent and answers the finished run.
async function echoRun(base: string, token: string, skillId: string, tenant = "dev"): Promise<Json> {
  const agent = await api(base, token, "POST", "agents", { agent: { name: "echo", skillIds: [skillId], steps: [{ skillId, tool: "echo", arguments: '{"text": "hi"}' }] } }, tenant);
  expect(agent.status).toBe(201);
  const started = await api(base, token, "POST", `agents/${(agent.body.agent as Json).id as string}/run`, {}, tenant);
  expect(started.status).toBe(200);
  const id = (started.body.run as Json).id as string;
  return waitFor(`run ${id} to end`, PATIENCE_MS, async () => {
    const { run } = (await api(base, token, "GET", `runs/${id}`, undefined, tenant)).body as { run: Json };
    return ["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string) ? undefined : run;
  });
}

describe("agentplane dev", () => {
  // One data dir through three processes, as `make run` is stopped and
  // started again: each test takes over the process the one before left
  // running (a dev start is seconds of this suite on a loaded machine).
  const dir = dirs.make();
  let dev: CliProcess;
  beforeAll(async () => {
    dev = await startDev(dir);
  });

  it("calls an MCP server on 127.0.0.1 with no configuration, and says so in the banner", async () => {
    expect(bannerLine(dev, "outbound:")).toContain("127.0.0.0/8, ::1/128 allowed");
    const token = await devToken(dev);
    const created = await api(dev.url, token, "POST", "skills", { skill: { name: "local", mcpUrl: customer.url } });
    expect(created.status).toBe(201);
    const skill = created.body.skill as Json;
    expect(skill.toolsRefreshError ?? "").toBe("");
    expect((skill.tools as Json[]).map((t) => t.name)).toContain("echo");
    const run = await echoRun(dev.url, token, skill.id as string);
    expect(run.status).toBe("RUN_STATUS_SUCCEEDED");
  });

  it("prints a webhook curl for its `dev` source that works, and the same token after a restart (kept 0600)", async () => {
    const curl = bannerLine(dev, "curl -s -X POST");
    const [, url] = /POST (\S+)/.exec(curl)!;
    const [, webhookToken] = /X-Webhook-Token: (whk_[\w-]+)/.exec(curl)!;
    const [, body] = /-d '([^']+)'/.exec(curl)!;
    expect(url).toBe(`${dev.url}/webhooks/events`);
    // Pasted into a shell, the line sends this request.
    const { stdout } = await exec("bash", ["-c", curl.trim()]);
    expect(JSON.parse(stdout)).toMatchObject({ event_id: expect.stringMatching(/^evt_/), matched_triggers: 0 });
    const token = await devToken(dev);
    const sources = (await api(dev.url, token, "GET", "webhook-sources")).body.webhookSources as Json[];
    expect(sources.map((s) => s.name)).toEqual(["dev"]);
    expect(statSync(join(dir, "dev-webhook-source.json")).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, "dev-webhook-source.json"), "utf8")).toContain(webhookToken);
    await dev.kill();

    dev = await startDev(dir);
    expect(bannerLine(dev, "curl -s -X POST")).toContain(webhookToken);
    const again = await fetch(`${dev.url}/webhooks/events`, { method: "POST", headers: { "content-type": "application/json", "x-webhook-token": webhookToken! }, body });
    expect(again.status).toBe(202);
  });

  it("replaces a token rotated elsewhere, so the banner never prints one that fails", async () => {
    const first = /X-Webhook-Token: (whk_[\w-]+)/.exec(bannerLine(dev, "curl -s -X POST"))![1]!;
    const token = await devToken(dev);
    const [source] = (await api(dev.url, token, "GET", "webhook-sources")).body.webhookSources as Json[];
    const rotated = await api(dev.url, token, "POST", `webhook-sources/${source!.id as string}/rotate-token`, { gracePeriod: "0s" });
    expect(rotated.status).toBe(200);
    await dev.kill();

    dev = await startDev(dir);
    const second = /X-Webhook-Token: (whk_[\w-]+)/.exec(bannerLine(dev, "curl -s -X POST"))![1]!;
    expect(second).not.toBe(first);
    const res = await fetch(`${dev.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": second },
      body: JSON.stringify({ event_type: "dev.hello", payload: {} }),
    });
    expect(res.status).toBe(202);
    const sources = (await api(dev.url, await devToken(dev), "GET", "webhook-sources")).body.webhookSources as Json[];
    expect(sources).toHaveLength(1);
    await dev.kill();
  });

  it("an explicit AGENTPLANE_OUTBOUND_ALLOW replaces the loopback default, and the refusal names the variable", async () => {
    const dev = await startDev(dirs.make(), { AGENTPLANE_OUTBOUND_ALLOW: "10.0.0.0/8" });
    expect(bannerLine(dev, "outbound:")).toContain("10.0.0.0/8 allowed");
    const token = await devToken(dev);
    const created = await api(dev.url, token, "POST", "skills", { skill: { name: "local", mcpUrl: customer.url } });
    expect((created.body.skill as Json).toolsRefreshError).toContain("outbound_blocked");
    expect((created.body.skill as Json).toolsRefreshError).toContain("AGENTPLANE_OUTBOUND_ALLOW");
    await dev.kill();
  });
});

describe("agentplane serve", () => {
  it("never allows loopback by default: the skill's refusal is outbound_blocked naming AGENTPLANE_OUTBOUND_ALLOW", async () => {
    idp = await startSigningIdp("https://idp.dev-mode.test", "https://api.dev-mode.test");
    const token = await idp.sign("ops");
    const dir = await dirs.withTenant("acme", "ops");
    // No AGENTPLANE_OUTBOUND_ALLOW: the default is what this checks.
    const serve = new CliProcess(
      ["serve"],
      {
        AGENTPLANE_DATA_DIR: dir,
        ...jwtEnv(idp),
        AGENTPLANE_SECRET_KEY: Buffer.alloc(32, 7).toString("base64"),
        AGENTPLANE_WORKER_THREADS: "1",
        AGENTPLANE_LOG_LEVEL: "warn",
      },
      await freeLoopbackPort(),
    );
    await serve.ready("agentplane serve");
    const created = await api(serve.url, token, "POST", "skills", { skill: { name: "local", mcpUrl: customer.url } }, "acme");
    expect(created.status).toBe(201);
    const skill = created.body.skill as Json;
    expect(skill.toolsRefreshError).toContain("outbound_blocked");
    expect(skill.toolsRefreshError).toContain("AGENTPLANE_OUTBOUND_ALLOW");
    const run = await echoRun(serve.url, token, skill.id as string, "acme");
    expect(run.status).toBe("RUN_STATUS_FAILED");
    expect(run.error).toContain("outbound_blocked");
    expect(run.error).toContain("AGENTPLANE_OUTBOUND_ALLOW");
    await serve.kill();
  });
});
