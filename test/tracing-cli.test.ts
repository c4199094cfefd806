// Tracing as an operator turns it on: the built CLI (`agentplane dev`, runs
// executed in a worker thread) with the standard OTEL_* variables exports
// OTLP over HTTP/protobuf to a collector; the HTTP thread's spans and the
// runtime thread's spans carry the webhook sender's trace id. Without
// OTEL_TRACES_EXPORTER nothing is exported and no traceparent goes out, and
// an exporter the service does not ship is refused by name.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { CLI, CliProcess } from "./support/cli-process.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { freeLoopbackPort } from "./support/listen.js";
import { sleep, waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;

// An OTLP/HTTP collector that keeps each export request.
async function startCollector(): Promise<{ url: string; exports: { path: string; type: string; body: Buffer }[]; close(): Promise<void> }> {
  const exports: { path: string; type: string; body: Buffer }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      exports.push({ path: req.url ?? "", type: String(req.headers["content-type"]), body: Buffer.concat(chunks) });
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, exports, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

let mcp: CustomerMcp;
let collector: Awaited<ReturnType<typeof startCollector>>;
const dirs: string[] = [];
beforeAll(async () => {
  mcp = await startOpenMcp();
  collector = await startCollector();
});
afterAll(async () => {
  await CliProcess.killAll();
  await mcp.close();
  await collector.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function startDev(env: Record<string, string>): Promise<CliProcess> {
  const dir = mkdtempSync(join(tmpdir(), "agentplane-tracing-"));
  dirs.push(dir);
  const dev = new CliProcess(
    ["dev"],
    { AGENTPLANE_DATA_DIR: dir, AGENTPLANE_WORKER_THREADS: "1", AGENTPLANE_LOG_LEVEL: "warn", AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8", ...env },
    await freeLoopbackPort(),
  );
  await dev.ready("agentplane dev", () => (/dev client: /.test(dev.output) ? true : undefined));
  return dev;
}

// Sets up tenant `dev` (a skill, an agent calling echo, a source and a
// trigger), posts one event with the sender's traceparent and waits for its run.
async function sendTracedEvent(dev: CliProcess, traceId: string): Promise<void> {
  const [, clientId, clientSecret] = /dev client: (\S+) \/ (\S+)/.exec(dev.output)!;
  const token = (await (
    await fetch(`${dev.url}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ client_id: clientId, client_secret: clientSecret, audience: dev.url, grant_type: "client_credentials" }),
    })
  ).json()) as Json;
  const call = async (method: string, body: unknown): Promise<Json> => {
    const res = await fetch(`${dev.url}/platform.v1.PlatformService/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token.access_token as string}`, "x-platform-tenant": "dev" },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as Json;
    if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const skillId = ((await call("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
  const agentId = ((await call("CreateAgent", { agent: { name: "echo", skillIds: [skillId], steps: [{ skillId, tool: "echo", arguments: '{"text": "hi"}' }] } })).agent as Json).id;
  const source = await call("CreateWebhookSource", { webhookSource: { name: "shop" } });
  await call("CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: "order.*" } } });
  const res = await fetch(`${dev.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": source.token as string, traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
    body: JSON.stringify({ event_type: "order.created", payload: {} }),
  });
  expect(res.status).toBe(202);
  const { event_id: eventId } = (await res.json()) as Json;
  await waitFor("the run to succeed", 20_000, async () => {
    const runIds = ((await call("GetEvent", { id: eventId })).event as Json).runIds as string[] | undefined;
    if (!runIds?.length) return undefined;
    const run = (await call("GetRun", { id: runIds[0] })).run as Json;
    return run.status === "RUN_STATUS_SUCCEEDED" ? run : undefined;
  });
}

it("exports the webhook's spans from the HTTP thread and the run's from the runtime thread, in the sender's trace", async () => {
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const dev = await startDev({
    OTEL_TRACES_EXPORTER: "otlp",
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    OTEL_SERVICE_NAME: "agentplane-traced",
    OTEL_BSP_SCHEDULE_DELAY: "100",
  });
  const sent = mcp.traceparents().length;
  await sendTracedEvent(dev, traceId);
  // Span names and ids are plain bytes in the protobuf: enough to tell
  // which thread exported what without decoding it.
  const id = Buffer.from(traceId, "hex");
  const holding = (text: string) => collector.exports.find((e) => e.body.includes(id) && e.body.includes(text));
  const received = await waitFor("the webhook's spans", 10_000, () => holding("POST /webhooks/events"));
  const executed = await waitFor("the run's spans", 10_000, () => holding("execute run"));
  expect(received).not.toBe(executed);
  for (const e of [received, executed]) {
    expect(e).toMatchObject({ path: "/v1/traces", type: "application/x-protobuf" });
    expect(e.body.includes("agentplane-traced")).toBe(true);
  }
  expect(holding("ingest event")).toBeDefined();
  expect(holding("tools/call echo")).toBeDefined();
  expect(mcp.traceparents().slice(sent).some((t) => t.startsWith(`00-${traceId}-`))).toBe(true);
  await dev.kill();
});

it("with no OTEL_TRACES_EXPORTER exports nothing and sends no traceparent, the endpoint set or not", async () => {
  const before = collector.exports.length;
  const dev = await startDev({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: "100" });
  const sent = mcp.traceparents().length;
  await sendTracedEvent(dev, "5bf92f3577b34da6a3ce929d0e0e4736");
  await sleep(500);
  expect(collector.exports.length).toBe(before);
  const later = mcp.traceparents().slice(sent);
  expect(later.length).toBeGreaterThan(0);
  expect(later.every((t) => t === "")).toBe(true);
  await dev.kill();
});

it("refuses an exporter, protocol or sampler it would not honour, naming the variable", async () => {
  const dir = mkdtempSync(join(tmpdir(), "agentplane-tracing-"));
  dirs.push(dir);
  const run = (env: Record<string, string>) =>
    promisify(execFile)(process.execPath, [CLI, "dev"], { env: { PATH: process.env.PATH, AGENTPLANE_DATA_DIR: dir, ...env } }).then(
      () => ({ code: 0, stderr: "" }),
      (e: { code: number; stderr: string }) => e,
    );
  const exporter = await run({ OTEL_TRACES_EXPORTER: "jaeger" });
  expect(exporter.code).toBe(1);
  expect(exporter.stderr).toContain('OTEL_TRACES_EXPORTER must be otlp or none, got "jaeger"');
  const wrong = await run({ OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", OTEL_TRACES_SAMPLER: "sometimes" });
  expect(wrong.code).toBe(1);
  expect(wrong.stderr).toContain('OTEL_EXPORTER_OTLP_PROTOCOL (or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) must be http/protobuf, the exporter this service ships, got "grpc"');
  expect(wrong.stderr).toContain('OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got "sometimes"');
});
