// GetTenantOverview through the real server: a known load written to the
// store, then the same figures over Connect, the REST mirror and the
// platform MCP endpoint, for an admin and a viewer alike, none of another
// tenant's.
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { idFloor, type IdKind } from "../src/lib/ids.js";
import type { RunInsert } from "../src/store/rows.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

const AUD = "https://api.agentplane.test";
const SCOPES = ["platform:read", "platform:write", "mcp:platform.read", "mcp:platform.write"];

type Json = Record<string, unknown>;

let idp: TestIdp;
let server: TestServer;
const token: Record<string, string> = {};
const ids: Record<string, string> = {};

// An id made at `ms`, as newId would have made it then (UUIDv7 layout).
const idAt = (kind: IdKind, ms: number) =>
  `${idFloor(kind, ms).slice(0, -"0000-0000-000000000000".length)}7${randomBytes(2).toString("hex").slice(1)}-8${randomBytes(2).toString("hex").slice(1)}-${randomBytes(6).toString("hex")}`;

async function ok(method: string, body: unknown, as = "admin", tenant = "acme"): Promise<Json> {
  const res = await connectCall(server, method, body, bearer(token[as]!, tenant));
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

// The figures that do not move with the clock between two reads.
const stable = (overview: Json) => {
  const { computeTime: _c, oldestQueuedAge: _o, ...rest } = overview;
  return rest;
};

beforeAll(async () => {
  idp = await startIdp({
    accessTokenFormat: "jwt",
    audience: AUD,
    scopes: SCOPES,
    clients: ["admin", "viewer", "globex"].map((clientId) => ({ clientId, clientSecret: `${clientId}-secret-0123456789`, scope: SCOPES.join(" ") })),
  });
  for (const client of ["admin", "viewer", "globex"]) token[client] = await idp.token(client, "platform:read platform:write");
  token.viewerMcp = await idp.token("viewer", "mcp:platform.read");
  const authenticator = createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 });
  server = await startServer({ authenticator, mcpAuthorizationServers: [idp.issuer] });
  const acmeId = await server.seedTenant("acme", [
    { subject: "admin", role: "admin" },
    { subject: "viewer", role: "viewer" },
  ]);
  const globexId = await server.seedTenant("globex", [{ subject: "globex", role: "admin" }]);
  for (const name of ["fulfil", "notify"]) ids[name] = ((await ok("CreateAgent", { agent: { name, model: PLACEHOLDER_MODEL } })).agent as Json).id as string;
  ids.trigger = ((await ok("CreateTrigger", { trigger: { agentId: ids.fulfil, webhook: { eventTypePattern: "order.*" } } })).trigger as Json).id as string;

  // Within the last hour, a few minutes apart.
  const now = Date.now();
  const ago = (minutes: number) => now - minutes * 60_000;
  const run = (at: number, patch: Partial<RunInsert>, tenantId = acmeId) =>
    server.store.runs.insert({ id: idAt("run", at), tenantId, agentId: ids.fulfil!, status: "succeeded", steps: [], createTime: at, updateTime: at, ...patch });
  const ended = (at: number, ms: number) => ({ startTime: at + 5, endTime: at + 5 + ms });
  await run(ago(40), { triggerId: ids.trigger, ...ended(ago(40), 1200) });
  await run(ago(40) + 1, { triggerId: ids.trigger, ...ended(ago(40), 800) });
  await run(ago(30), { status: "failed", triggerId: ids.trigger, error: "steps[0] (send): skill_rejected: 404 not an MCP endpoint", ...ended(ago(30), 3000) });
  await run(ago(20), { status: "failed", agentId: ids.notify!, error: "model_error: 500 upstream", ...ended(ago(20), 400) });
  await run(ago(10), { status: "timed_out", error: "agent timeout", ...ended(ago(10), 30_000) });
  await run(ago(5), { status: "queued" });
  // Before the window, and another tenant's.
  await run(ago(200), { status: "failed", error: "model_error: 500", ...ended(ago(200), 10) });
  await run(ago(20), { status: "failed", error: "model_error: 500", ...ended(ago(20), 10) }, globexId);
  for (const at of [ago(40), ago(30), ago(30) + 1])
    await server.store.events.insert({ id: idAt("evt", at), tenantId: acmeId, sourceId: "src_x", eventType: "order.created", payload: {}, receiveTime: at, matchedTriggerIds: [], createTime: at, updateTime: at });
});
afterAll(async () => {
  await server?.close();
  await idp?.stop();
});

describe("GetTenantOverview", () => {
  it("gives the window's figures: totals, failure rate, percentiles, queue, what fails most, failure kinds", async () => {
    const { overview } = (await ok("GetTenantOverview", { window: "OVERVIEW_WINDOW_HOUR" })) as { overview: Json };
    expect(overview).toMatchObject({
      window: "OVERVIEW_WINDOW_HOUR",
      bucketWidth: "60s",
      events: 3,
      runs: { succeeded: 2, failed: 2, timedOut: 1, queued: 1 },
      failureRate: 0.6,
      // 400, 800, 1200, 3000, 30000: rank 3 and rank 5.
      durationP50: "1.200s",
      durationP95: "30s",
      endedRuns: 5,
      queuedRuns: 1,
      failingAgents: [
        { agentId: ids.fulfil, agentName: "fulfil", failures: 2, runs: 5 },
        { agentId: ids.notify, agentName: "notify", failures: 1, runs: 1 },
      ],
      failingTriggers: [{ triggerId: ids.trigger, agentId: ids.fulfil, agentName: "fulfil", failures: 1, runs: 3 }],
      failureKinds: [
        { kind: "agent_timeout", count: 1 },
        { kind: "model_error", count: 1 },
        { kind: "skill_rejected", count: 1 },
      ],
    });
    expect(overview.oldestQueuedAge).toMatch(/^(29\d|30\d)(\.\d+)?s$/);
    const buckets = overview.buckets as Json[];
    expect(buckets).toHaveLength(60);
    const start = Date.parse(overview.startTime as string);
    expect(Date.parse(overview.endTime as string) - start).toBe(3600_000);
    const sum = (f: (b: Json) => number) => buckets.reduce((a, b) => a + f(b), 0);
    expect(sum((b) => (b.events as number | undefined) ?? 0)).toBe(3);
    expect(sum((b) => ((b.runs as Json | undefined)?.failed as number | undefined) ?? 0)).toBe(2);
    buckets.forEach((b, i) => expect(Date.parse(b.startTime as string)).toBe(start + i * 60_000));
  });

  it("answers the same figures over REST and MCP, to a viewer too, and nothing of another tenant", async () => {
    const connect = (await ok("GetTenantOverview", { window: "OVERVIEW_WINDOW_DAY" }, "viewer")).overview as Json;
    const rest = await fetch(`${server.url}/api/v1/tenant-overview?window=OVERVIEW_WINDOW_DAY`, { headers: bearer(token.viewer!, "acme") });
    expect(rest.status).toBe(200);
    const viaRest = ((await rest.json()) as Json).overview as Json;
    expect(stable(viaRest)).toEqual(stable(connect));

    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp?tenant=acme`), { requestInit: { headers: bearer(token.viewerMcp!) } }));
    const tool = (await client.listTools()).tools.find((t) => t.name === "get_tenant_overview");
    expect(tool).toMatchObject({ annotations: { readOnlyHint: true } });
    const result = (await client.callTool({ name: "get_tenant_overview", arguments: { window: "OVERVIEW_WINDOW_DAY" } })) as CallToolResult;
    await client.close();
    expect(result.isError).toBeFalsy();
    expect(stable((result.structuredContent as Json).overview as Json)).toEqual(stable(connect));
    // The run 200 minutes ago is in the day, not in the hour.
    expect(connect).toMatchObject({ window: "OVERVIEW_WINDOW_DAY", bucketWidth: "900s", runs: { failed: 3 } });
    expect(connect.buckets as Json[]).toHaveLength(96);

    const theirs = (await ok("GetTenantOverview", { window: "OVERVIEW_WINDOW_WEEK" }, "globex", "globex")).overview as Json;
    expect(theirs).toMatchObject({ runs: { failed: 1 }, failureKinds: [{ kind: "model_error", count: 1 }] });
    expect(theirs.events ?? 0).toBe(0); // proto JSON leaves a zero out
    // Not its agent: no name (an empty string, left out).
    expect(theirs.failingAgents).toEqual([{ agentId: ids.fulfil, failures: 1, runs: 1 }]);
    expect(theirs.buckets as Json[]).toHaveLength(168);
  });
});
