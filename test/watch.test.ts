// Live streams (issue 11): WatchRun, WatchRuns and WatchEvents through real
// generated clients over Connect, gRPC (h2c) and gRPC-Web; a real agent
// runtime calling a real MCP SDK server; their bounds (per-caller cap, idle
// end, HTTP limits that must not cut them, client gone, shutdown); and on
// PostgreSQL a change made through one replica reaching a stream on another.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { PlatformService } from "../gen/platform/v1/platform_service_pb.js";
import { RunStatus, type Run } from "../gen/platform/v1/run_pb.js";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { DEFAULT_STREAM_LIMITS } from "../src/service/streams.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { startServer, type TestServer, type TestServerOptions } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

const AUD = "https://api.agentplane.test";
const exec = promisify(execFile);
const RW = "platform:read platform:write";

type Platform = Client<typeof PlatformService>;
type Protocol = "connect" | "grpc" | "grpc-web";
const PROTOCOLS: Protocol[] = ["connect", "grpc", "grpc-web"];

function transport(server: TestServer, protocol: Protocol): Transport {
  if (protocol === "grpc") return createGrpcTransport({ baseUrl: server.url });
  if (protocol === "grpc-web") return createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" });
  return createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" });
}

let idp: TestIdp;
const tokens: Record<string, string> = {};
const headers = (who: string, tenant: string) => ({ authorization: `Bearer ${tokens[who]}`, "x-platform-tenant": tenant });

// Reads a stream in the background: its messages as they come, how it ended.
interface Reader<T> {
  messages: T[];
  done: Promise<{ error?: ConnectError; ms: number }>;
  stop(): void;
  // Milliseconds until the empty "open" message came, if it did.
  opened(): number | undefined;
}
function read<T>(open: (signal: AbortSignal) => AsyncIterable<T>): Reader<T> {
  const controller = new AbortController();
  const messages: T[] = [];
  const started = Date.now();
  let opened: number | undefined;
  const done = (async () => {
    try {
      for await (const m of open(controller.signal)) {
        // WatchRuns' and WatchEvents' first message, that they are open, carries nothing.
        if (opened === undefined && Object.keys(m as object).every((k) => k.startsWith("$"))) opened = Date.now() - started;
        else messages.push(m);
      }
      return { ms: Date.now() - started };
    } catch (err) {
      return { error: ConnectError.from(err), ms: Date.now() - started };
    }
  })();
  return { messages, done, stop: () => controller.abort(), opened: () => opened };
}

// The deadline is room for any load, not a measure: no test here tells a
// fast path from a slow one by it.
async function until(check: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function postEvent(server: TestServer, token: string, eventType: string, payload: unknown = {}): Promise<string> {
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token },
    body: JSON.stringify({ event_type: eventType, payload }),
  });
  const body = (await res.json()) as { event_id: string };
  if (res.status !== 202) throw new Error(`webhook: ${res.status} ${JSON.stringify(body)}`);
  return body.event_id;
}

beforeAll(async () => {
  idp = await startIdp({
    clients: [
      { clientId: "ops", clientSecret: "s", scope: RW },
      { clientId: "watcher", clientSecret: "s", scope: "platform:read" },
      { clientId: "rival", clientSecret: "s", scope: RW },
    ],
    scopes: ["platform:read", "platform:write"],
    audience: AUD,
    accessTokenFormat: "jwt",
  });
  tokens.ops = await idp.token("ops", RW);
  tokens.watcher = await idp.token("watcher", "platform:read");
  tokens.rival = await idp.token("rival", RW);
});
afterAll(() => idp.stop());

const jwt = () => createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 });

async function serve(options: Partial<TestServerOptions> = {}): Promise<TestServer> {
  const server = await startServer({ authenticator: jwt(), webhook: { maxBytes: 1 << 20, ratePerSecond: 1e6, burst: 1e6 }, ...options });
  if (!options.databaseUrl) {
    await server.seedTenant("acme", [
      { subject: "ops", role: "admin" },
      { subject: "watcher", role: "viewer" },
    ]);
    await server.seedTenant("globex", [{ subject: "rival", role: "admin" }]);
  }
  return server;
}

describe("on SQLite, with the agent runtime", () => {
  let server: TestServer;
  let mcp: CustomerMcp;
  let api: Platform;
  let skillId: string;

  beforeAll(async () => {
    mcp = await startOpenMcp();
    server = await serve({ outboundAllow: ["127.0.0.0/8"], runtime: { executor: "agents", concurrency: 4 } });
    api = createClient(PlatformService, transport(server, "connect"));
    skillId = (await api.createSkill({ skill: { name: "tools", mcpUrl: mcp.url } }, { headers: headers("ops", "acme") })).skill!.id;
  });
  afterAll(async () => {
    await server.close();
    await mcp.close();
  });

  const acme = () => ({ headers: headers("ops", "acme") });

  // Names are unique in a tenant: each agent gets its own.
  let agents = 0;
  async function threeStepAgent(): Promise<string> {
    const steps = [150, 150, 150].map((ms) => ({ skillId, tool: "slow", arguments: `{"ms": ${ms}}` }));
    return (await api.createAgent({ agent: { name: `three steps ${++agents}`, skillIds: [skillId], steps } }, acme())).agent!.id;
  }

  it.each(PROTOCOLS)("WatchRun over %s delivers each step in order and ends at succeeded", async (protocol) => {
    // Each step's tool call waits until the stream has shown the step before
    // it ended: two step ends never reach the stream as one change, however
    // slow the machine.
    const steps = [1, 2, 3].map((n) => ({ skillId, tool: "track", arguments: `{"key": "step ${n}", "ms": 0}` }));
    const agentId = (await api.createAgent({ agent: { name: `gated ${++agents}`, skillIds: [skillId], steps } }, acme())).agent!.id;
    const ended = (r: Run) => r.steps.filter((s) => s.endTime).length;
    const releases = [1, 2, 3].map((n) => mcp.holdTrackKey(`step ${n}`));
    const { run } = await api.runAgent({ id: agentId }, acme());
    const client = createClient(PlatformService, transport(server, protocol));
    const watched = read((signal) => client.watchRun({ id: run!.id }, { ...acme(), signal }));
    try {
      for (const [i, release] of releases.entries()) {
        await until(() => watched.messages.some((m) => ended(m.run!) === i));
        release();
      }
    } finally {
      for (const release of releases) release();
    }
    const end = await watched.done;
    expect(end.error).toBeUndefined();
    const runs = watched.messages.map((m) => m.run!);
    expect(runs.every((r) => r.id === run!.id && r.tenant === "acme")).toBe(true);
    expect([RunStatus.QUEUED, RunStatus.RUNNING]).toContain(runs[0]!.status);
    // The last message is the ended run, once; nothing comes after it.
    expect(runs.at(-1)!.status).toBe(RunStatus.SUCCEEDED);
    expect(toJson(ValueSchema, runs.at(-1)!.output!)).toEqual("tracked");
    expect(runs.filter((r) => r.status === RunStatus.SUCCEEDED)).toHaveLength(1);
    // Each step appears while the run goes on, in order, and stays as it was.
    const counts = runs.map(ended);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect(new Set(counts)).toEqual(new Set([0, 1, 2, 3]));
    for (const r of runs)
      r.steps.forEach((step, i) => {
        expect(step.tool).toBe("track");
        if (step.endTime) expect(runs.at(-1)!.steps[i]!.endTime).toEqual(step.endTime);
      });
    // No message repeats the one before it.
    for (let i = 1; i < runs.length; i++) expect(runs[i]).not.toEqual(runs[i - 1]);
  });

  it("WatchRun of an ended run sends it once and ends; an unknown or another tenant's run is not found", async () => {
    const agentId = await threeStepAgent();
    const { run } = await api.runAgent({ id: agentId }, acme());
    await until(async () => (await api.getRun({ id: run!.id }, acme())).run!.status === RunStatus.SUCCEEDED);
    const once = read((signal) => api.watchRun({ id: run!.id }, { ...acme(), signal }));
    expect((await once.done).error).toBeUndefined();
    expect(once.messages.map((m) => m.run!.status)).toEqual([RunStatus.SUCCEEDED]);

    // buf curl prints each message of the stream as it comes (here the one).
    const curl = await exec("node_modules/.bin/buf", [
      "curl", "--schema", "proto",
      "--header", `Authorization: Bearer ${tokens.ops}`, "--header", "X-Platform-Tenant: acme",
      "--data", JSON.stringify({ id: run!.id }),
      `${server.url}/platform.v1.PlatformService/WatchRun`,
    ]);
    expect(JSON.parse(curl.stdout)).toMatchObject({ run: { id: run!.id, status: "RUN_STATUS_SUCCEEDED", tenant: "acme" } });

    for (const [who, tenant, id] of [
      ["ops", "acme", "run_00000000-0000-7000-8000-000000000000"],
      ["rival", "globex", run!.id],
    ] as const) {
      const missing = read((signal) => api.watchRun({ id }, { headers: headers(who, tenant), signal }));
      const { error } = await missing.done;
      expect(error?.code).toBe(Code.NotFound);
      expect(error?.rawMessage).toBe(`run "${id}" not found`);
      expect(missing.messages).toEqual([]);
    }
  });

  it("WatchEvents sees a webhook's event with its runs; another tenant's events never appear", async () => {
    const source = await api.createWebhookSource({ webhookSource: { name: "shop" } }, acme());
    const other = await api.createWebhookSource({ webhookSource: { name: "shop" } }, { headers: headers("rival", "globex") });
    const agentId = await threeStepAgent();
    await api.createTrigger({ trigger: { agentId, kind: { case: "webhook", value: { eventTypePattern: "order.*" } } } }, acme());
    const mine = read((signal) => api.watchEvents({ sourceId: source.webhookSource!.id }, { ...acme(), signal }));
    const typed = read((signal) => api.watchEvents({ eventType: "invoice.paid" }, { ...acme(), signal }));
    const theirs = read((signal) => api.watchEvents({}, { headers: headers("rival", "globex"), signal }));
    await until(() => [mine, typed, theirs].every((r) => r.opened() !== undefined)); // subscribed: nothing after is missed

    const theirId = await postEvent(server, other.token, "order.created", { total: 1 });
    const eventId = await postEvent(server, source.token, "order.created", { total: 250 });
    const paidId = await postEvent(server, source.token, "invoice.paid");
    await until(() => mine.messages.length === 2 && typed.messages.length === 1 && theirs.messages.length === 1);
    await new Promise((r) => setTimeout(r, 1500)); // a poll later, still nothing more
    for (const r of [mine, typed, theirs]) r.stop();

    expect(mine.messages.map((m) => m.event!.id)).toEqual([eventId, paidId]);
    const event = mine.messages[0]!.event!;
    expect(event).toMatchObject({ tenant: "acme", eventType: "order.created", sourceId: source.webhookSource!.id, payload: { total: 250 } });
    expect(event.runIds).toHaveLength(1);
    expect((await api.getRun({ id: event.runIds[0]! }, acme())).run!.eventId).toBe(eventId);
    expect(typed.messages.map((m) => m.event!.id)).toEqual([paidId]);
    expect(theirs.messages.map((m) => [m.event!.id, m.event!.tenant])).toEqual([[theirId, "globex"]]);
    for (const r of [mine, typed, theirs]) expect((await r.done).error?.code).toBe(Code.Canceled);
  });

  it.each(PROTOCOLS)("WatchRuns and WatchEvents over %s say they are open with an empty first message, before any change", async (protocol) => {
    const client = createClient(PlatformService, transport(server, protocol));
    const quiet = { headers: headers("rival", "globex") };
    const runs = read((signal) => client.watchRuns({ agentId: "agt_none" }, { ...quiet, signal }));
    const events = read((signal) => client.watchEvents({ eventType: "never.sent" }, { ...quiet, signal }));
    await until(() => runs.opened() !== undefined && events.opened() !== undefined);
    for (const r of [runs, events]) r.stop();
    expect([runs.messages, events.messages]).toEqual([[], []]);
  });

  it("WatchRuns filters by status and agent; a viewer may watch", async () => {
    // Its one step waits until the stream has shown the run running.
    const key = `filters ${++agents}`;
    const steps = [{ skillId, tool: "track", arguments: `{"key": "${key}", "ms": 0}` }];
    const agentId = (await api.createAgent({ agent: { name: key, skillIds: [skillId], steps } }, acme())).agent!.id;
    const release = mcp.holdTrackKey(key);
    const succeeded = read((signal) => api.watchRuns({ status: RunStatus.SUCCEEDED, agentId }, { ...acme(), signal }));
    const everything = read((signal) => api.watchRuns({ agentId }, { headers: headers("watcher", "acme"), signal }));
    const rival = read((signal) => api.watchRuns({}, { headers: headers("rival", "globex"), signal }));
    await until(() => [succeeded, everything, rival].every((r) => r.opened() !== undefined));
    const { run } = await api.runAgent({ id: agentId }, acme());
    await until(() => everything.messages.some((m) => m.run!.status === RunStatus.RUNNING)).finally(release);
    // Each stream has the end (streams see a change apart), then a poll later nothing more.
    await until(() => succeeded.messages.length === 1 && everything.messages.some((m) => m.run!.status === RunStatus.SUCCEEDED));
    await new Promise((r) => setTimeout(r, 1500));
    for (const r of [succeeded, everything, rival]) r.stop();

    expect(succeeded.messages.map((m) => [m.run!.id, m.run!.status])).toEqual([[run!.id, RunStatus.SUCCEEDED]]);
    const statuses = everything.messages.map((m) => m.run!.status);
    expect(everything.messages.every((m) => m.run!.id === run!.id)).toBe(true);
    expect(statuses[0]).toBe(RunStatus.QUEUED);
    expect(statuses.at(-1)).toBe(RunStatus.SUCCEEDED);
    expect(statuses).toContain(RunStatus.RUNNING);
    // Each change once: no (update time) repeats.
    const versions = everything.messages.map((m) => `${m.run!.updateTime!.seconds}.${m.run!.updateTime!.nanos}`);
    expect(new Set(versions).size).toBe(versions.length);
    expect(rival.messages).toEqual([]);
  });

  it("a non-member is refused before any message", async () => {
    const outsider = read((signal) => api.watchRuns({}, { headers: headers("rival", "acme"), signal }));
    const { error } = await outsider.done;
    expect(error?.code).toBe(Code.PermissionDenied);
    expect(error?.rawMessage).toBe('not a member of tenant "acme"');
  });
});

describe("bounds", () => {
  // `idling` ends idle streams soon; on `server` only the client or the
  // shutdown ends them (10 minutes idle), so what a test counts there stays
  // open for as long as a loaded machine takes.
  let idling: TestServer;
  let server: TestServer;
  let api: Platform;
  const IDLE_MS = 3000;

  beforeAll(async () => {
    // HTTP limits well below the stream's life: none of them may cut it. A
    // request must still arrive whole within them, which a loaded machine
    // takes more than the 300 ms these once were for.
    idling = await serve({ streams: { idleMs: IDLE_MS }, http: { headersTimeoutMs: 1000, requestTimeoutMs: 1000, idleTimeoutMs: 1000 } });
    server = await serve({ streams: { idleMs: 600_000, maxPerCaller: 2 } });
    api = createClient(PlatformService, transport(server, "connect"));
  });
  afterAll(async () => {
    await idling.close();
    await server.close();
  });

  it.each(PROTOCOLS)("an idle stream over %s ends OK after the idle timeout, not cut by the HTTP timeouts", async (protocol) => {
    const client = createClient(PlatformService, transport(idling, protocol));
    const r = read((signal) => client.watchEvents({}, { headers: headers("ops", "acme"), signal }));
    const { error, ms } = await r.done;
    expect(error).toBeUndefined();
    expect(ms).toBeGreaterThanOrEqual(IDLE_MS - 50);
    // Nothing else ends it this side of the default idle time (5 minutes):
    // a tenth of that is room for any load, and still only IDLE_MS ends it.
    expect(ms).toBeLessThan(DEFAULT_STREAM_LIMITS.idleMs / 10);
  });

  it("caps the open streams of a caller in a tenant, naming the cap; they are freed when the client goes away", async () => {
    const opts = (signal: AbortSignal) => ({ headers: headers("ops", "acme"), signal });
    const open = [read((s) => api.watchRuns({}, opts(s))), read((s) => api.watchEvents({}, opts(s)))];
    await until(() => server.app.platform.openStreams() === 2);
    const third = read((s) => api.watchEvents({}, opts(s)));
    const { error } = await third.done;
    expect(error?.code).toBe(Code.ResourceExhausted);
    expect(error?.rawMessage).toBe('too many open streams: at most 2 per caller in tenant "acme"; close one first');
    // Another caller, or the same one in another tenant, has a cap of its own.
    const viewer = read((s) => api.watchEvents({}, { headers: headers("watcher", "acme"), signal: s }));
    await until(() => server.app.platform.openStreams() === 3);
    expect(server.store.signals.tenantListeners()).toBe(3);

    for (const r of [...open, viewer]) r.stop();
    await until(() => server.app.platform.openStreams() === 0 && server.store.signals.tenantListeners() === 0);
    const again = read((s) => api.watchEvents({}, opts(s)));
    await until(() => server.app.platform.openStreams() === 1);
    again.stop();
    await until(() => server.store.signals.tenantListeners() === 0 && server.app.platform.openStreams() === 0);
  });

  it("reports the open streams in /metrics", async () => {
    const r = read((s) => api.watchEvents({}, { headers: headers("ops", "acme"), signal: s }));
    await until(() => server.app.platform.openStreams() === 1);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/^agentplane_streams_open 1$/m);
    r.stop();
    await until(() => server.app.platform.openStreams() === 0);
  });

  it("ends open streams OK on shutdown, without holding the close", async () => {
    // The streams would end by themselves only after ten hours idle: a close
    // that waited for them would not end within the test's timeout.
    const other = await serve({ streams: { idleMs: 36_000_000 } });
    const streams = PROTOCOLS.map((p) => {
      const client = createClient(PlatformService, transport(other, p));
      return read((signal) => client.watchEvents({}, { headers: headers("ops", "acme"), signal }));
    });
    await until(() => other.app.platform.openStreams() === 3);
    await other.close();
    for (const r of streams) expect((await r.done).error).toBeUndefined();
    expect(other.store.signals.tenantListeners()).toBe(0);
  });
});

describe("on PostgreSQL, two replicas", () => {
  let a: TestServer;
  let b: TestServer;

  beforeAll(async () => {
    // A's streams poll the store once in 10 minutes: what reaches them in
    // this test came by NOTIFY.
    a = await serve({ store: "postgres", streams: { pollMs: 600_000 } });
    // B executes runs (the no-op executor); A only serves the streams.
    b = await serve({ store: "postgres", databaseUrl: a.databaseUrl, runtime: {} });
  });
  afterAll(async () => {
    await b.close();
    await a.close();
  });

  it("a change made through replica B reaches a stream on replica A", async () => {
    const onA = createClient(PlatformService, transport(a, "grpc"));
    const onB = createClient(PlatformService, transport(b, "connect"));
    const opts = { headers: headers("ops", "acme") };
    const source = await onB.createWebhookSource({ webhookSource: { name: "shop" } }, opts);
    const agentId = (await onB.createAgent({ agent: { name: "noop", model: PLACEHOLDER_MODEL } }, opts)).agent!.id;
    await onB.createTrigger({ trigger: { agentId, kind: { case: "webhook", value: { eventTypePattern: "order.*" } } } }, opts);

    const events = read((signal) => onA.watchEvents({}, { ...opts, signal }));
    const runs = read((signal) => onA.watchRuns({ status: RunStatus.SUCCEEDED }, { ...opts, signal }));
    const rival = read((signal) => onA.watchEvents({}, { headers: headers("rival", "globex"), signal }));
    await until(() => [events, runs, rival].every((r) => r.opened() !== undefined), 30_000);
    const eventId = await postEvent(b, source.token, "order.created", { total: 3 });
    await until(() => events.messages.length === 1, 30_000);
    await until(() => runs.messages.length === 1, 30_000);
    const runId = runs.messages[0]!.run!.id;
    expect(events.messages[0]!.event).toMatchObject({ id: eventId, tenant: "acme", runIds: [runId] });
    expect(runs.messages[0]!.run).toMatchObject({ eventId, status: RunStatus.SUCCEEDED });

    const { run } = await onB.runAgent({ id: agentId }, opts);
    const watched = read((signal) => onA.watchRun({ id: run!.id }, { ...opts, signal }));
    expect((await watched.done).error).toBeUndefined();
    expect(watched.messages.at(-1)!.run!.status).toBe(RunStatus.SUCCEEDED);

    // By NOTIFY (A polls once in 10 minutes), then nothing more.
    await until(() => runs.messages.some((m) => m.run!.id === run!.id), 30_000);
    await new Promise((r) => setTimeout(r, 1200));
    for (const r of [events, runs, rival]) r.stop();
    expect(rival.messages).toEqual([]);
    expect(runs.messages.map((m) => m.run!.id)).toEqual([runId, run!.id]);
    await until(() => a.store.signals.tenantListeners() === 0);
  });
});
