// Traces as an operator's collector sees them: one trace from a webhook's
// receipt (continuing the sender's traceparent) through ingest, the queued
// run, its steps and each tool and model call, with the customer's MCP
// server and the model provider receiving the trace context. A real server
// with the real agent runtime, a real MCP SDK server and a scripted model
// endpoint; spans are read from an in-memory exporter registered here as the
// process's tracer provider. Last, with the provider taken away (tracing
// off): nothing is recorded, stored or sent.
import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { startModelServer } from "./support/model-server.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register({ propagator: new W3CTraceContextPropagator() });

let issuer: DevIssuer;
let admin: string;
let mcp: CustomerMcp;

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  mcp = await startOpenMcp();
});
afterAll(async () => {
  await mcp.close();
  await provider.shutdown();
});

const hex = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join("");
// A caller's own trace: a fresh trace id and the caller's span id.
const callerTrace = () => ({ traceId: hex(32), spanId: hex(16) });
const traceparent = (t: { traceId: string; spanId: string }) => `00-${t.traceId}-${t.spanId}-01`;

const spansOf = (traceId: string) => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
function only(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = spans.filter((s) => s.name === name);
  if (found.length !== 1) throw new Error(`${found.length} spans named "${name}" in ${spans.map((s) => s.name).join(", ")}`);
  return found[0]!;
}
const childrenOf = (spans: ReadableSpan[], parent: ReadableSpan) => spans.filter((s) => parentOf(s) === parent.spanContext().spanId);

async function setUp(server: TestServer) {
  const tenantId = await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  const must = async (method: string, body: unknown): Promise<Json> => {
    const res = await connectCall(server, method, body, bearer(admin, "acme"));
    if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const skillId = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
  return { tenantId, skillId, must };
}

// Waits for the run's span: it ends after the run's outcome is stored.
const runSpan = (traceId: string, runId: string) =>
  waitFor(`the span of run ${runId}`, 15_000, () => spansOf(traceId).find((s) => s.name === "execute run" && s.attributes["agentplane.run.id"] === runId));

describe.each([["SQLite", "sqlite"] as const, ["PostgreSQL", "postgres"] as const])("on %s, a webhook's trace", (_name, engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ authenticator: issuer.authenticator(60), store: engine, outboundAllow: ["127.0.0.0/8"], runtime: { executor: "agents" } });
  });
  afterAll(() => server.close());

  it("goes from the sender's span through ingest, the run and its step to the tool call the customer's server receives", async () => {
    const { tenantId, skillId, must } = await setUp(server);
    const agentId = ((await must("CreateAgent", { agent: { name: "on-order", skillIds: [skillId], steps: [{ skillId, tool: "echo", arguments: '{"text": event.payload.id}' }] } })).agent as Json).id as string;
    const created = await must("CreateWebhookSource", { webhookSource: { name: "shop" } });
    const sourceId = (created.webhookSource as Json).id as string;
    const triggerId = ((await must("CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: "order.*" } } })).trigger as Json).id as string;

    const caller = callerTrace();
    const res = await fetch(`${server.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": created.token as string, traceparent: traceparent(caller) },
      body: JSON.stringify({ event_type: "order.created", payload: { id: "o-1", card: "4111-secret" } }),
    });
    expect(res.status).toBe(202);
    const eventId = ((await res.json()) as Json).event_id as string;
    const [runId] = await server.store.runs.idsForEvent(tenantId, eventId);
    const run = await runSpan(caller.traceId, runId!);
    const spans = spansOf(caller.traceId);

    // The server span continues the sender's trace, named by its route.
    const received = only(spans, "POST /webhooks/events");
    expect(received.kind).toBe(SpanKind.SERVER);
    expect(parentOf(received)).toBe(caller.spanId);
    expect(received.attributes).toMatchObject({
      "http.request.method": "POST",
      "http.route": "/webhooks/events",
      "http.response.status_code": 202,
      "agentplane.tenant.id": tenantId,
      "agentplane.webhook_source.id": sourceId,
    });

    const ingest = only(spans, "ingest event");
    expect(parentOf(ingest)).toBe(received.spanContext().spanId);
    expect(ingest.attributes).toMatchObject({
      "agentplane.tenant.id": tenantId,
      "agentplane.webhook_source.id": sourceId,
      "agentplane.event.id": eventId,
      "agentplane.event.type": "order.created",
      "agentplane.event.matched_triggers": 1,
    });
    expect(childrenOf(spans, ingest).map((s) => s.name).sort()).toEqual(["commit event", "execute run", "match triggers"]);

    // The run's span is the ingest span's child, across the queue: its
    // context was stored with the run.
    expect(parentOf(run)).toBe(ingest.spanContext().spanId);
    expect(run.kind).toBe(SpanKind.CONSUMER);
    expect(run.attributes).toMatchObject({
      "agentplane.tenant.id": tenantId,
      "agentplane.run.id": runId,
      "agentplane.agent.id": agentId,
      "agentplane.trigger.id": triggerId,
      "agentplane.event.id": eventId,
      "agentplane.run.attempt": 1,
      "agentplane.run.status": "succeeded",
    });
    expect((await server.store.runs.get(tenantId, runId!))?.traceParent).toBe(`00-${caller.traceId}-${ingest.spanContext().spanId}-01`);

    const [step] = childrenOf(spans, run);
    expect(step).toMatchObject({ name: "step tool_call" });
    expect(step!.attributes).toMatchObject({ "agentplane.step.kind": "tool_call", "agentplane.step.index": 0, "agentplane.skill.id": skillId, "gen_ai.tool.name": "echo" });
    const [call] = childrenOf(spans, step!);
    expect(call).toMatchObject({ name: "tools/call echo", kind: SpanKind.CLIENT });
    expect(call!.attributes).toMatchObject({ "agentplane.skill.id": skillId, "gen_ai.tool.name": "echo", "mcp.method.name": "tools/call" });
    expect(call!.status.code).not.toBe(SpanStatusCode.ERROR);
    // The customer's server received the tool call's own context.
    expect(mcp.traceparents()).toContain(`00-${caller.traceId}-${call!.spanContext().spanId}-01`);

    // Ids only: no payload, argument, result or credential in any attribute.
    const values = JSON.stringify(spans.map((s) => s.attributes));
    for (const secret of ["4111-secret", "o-1", created.token as string]) expect(values).not.toContain(secret);
  });
});

describe("on SQLite", () => {
  let server: TestServer;
  let tenantId: string;
  let skillId: string;
  let must: (method: string, body: unknown) => Promise<Json>;
  beforeAll(async () => {
    server = await startServer({ authenticator: issuer.authenticator(60), outboundAllow: ["127.0.0.0/8"], runtime: { executor: "agents" } });
    ({ tenantId, skillId, must } = await setUp(server));
  });
  afterAll(() => server.close());

  it("a model agent's trace holds each model call and the tool call it asked for, and the provider receives the context", async () => {
    const model = await startModelServer([{ toolCalls: [{ name: "tools__echo", arguments: { text: "hi" } }] }, { content: "done" }]);
    try {
      const agentId = ((await must("CreateAgent", { agent: { name: "assistant", skillIds: [skillId], model: { baseUrl: model.baseUrl, model: "scripted-1", apiKey: "sk-model-key" } } })).agent as Json).id as string;
      const caller = callerTrace();
      const res = await connectCall(server, "RunAgent", { id: agentId, input: { q: "x" } }, { ...bearer(admin, "acme"), traceparent: traceparent(caller) });
      expect(res.status).toBe(200);
      const runId = (res.body.run as Json).id as string;
      const run = await runSpan(caller.traceId, runId);
      const spans = spansOf(caller.traceId);

      // An API call honours the caller's traceparent too; its run is its child.
      const api = only(spans, "POST /platform.v1.PlatformService/RunAgent");
      expect(api.kind).toBe(SpanKind.SERVER);
      expect(parentOf(api)).toBe(caller.spanId);
      expect(api.attributes["agentplane.tenant.id"]).toBe(tenantId);
      expect(parentOf(run)).toBe(api.spanContext().spanId);

      const steps = childrenOf(spans, run).sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
      expect(steps.map((s) => s.name)).toEqual(["step model_call", "step tool_call", "step model_call"]);
      const chats = steps.filter((s) => s.name === "step model_call").map((s) => only(childrenOf(spans, s), "chat scripted-1"));
      for (const chat of chats) {
        expect(chat.kind).toBe(SpanKind.CLIENT);
        expect(chat.attributes).toMatchObject({ "gen_ai.operation.name": "chat", "gen_ai.request.model": "scripted-1", "server.address": "127.0.0.1" });
        expect(chat.attributes["gen_ai.usage.input_tokens"]).toEqual(expect.any(Number));
      }
      expect(model.traceparents()).toEqual(chats.map((c) => `00-${caller.traceId}-${c.spanContext().spanId}-01`));
      only(childrenOf(spans, steps[1]!), "tools/call echo");
    } finally {
      await model.close();
    }
  });

  it("marks a failed tool call, its step and its run with the error kind", async () => {
    const agentId = ((await must("CreateAgent", { agent: { name: "failing", skillIds: [skillId], steps: [{ skillId, tool: "fail", arguments: "" }] } })).agent as Json).id as string;
    const caller = callerTrace();
    const res = await connectCall(server, "RunAgent", { id: agentId }, { ...bearer(admin, "acme"), traceparent: traceparent(caller) });
    const run = await runSpan(caller.traceId, (res.body.run as Json).id as string);
    const spans = spansOf(caller.traceId);
    const step = only(spans, "step tool_call");
    const call = only(spans, "tools/call fail");
    for (const span of [run, step, call]) {
      expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(span.attributes["error.type"]).toBe("tool_error");
      // The kind, not the message (it may quote the tool's answer).
      expect(span.status.message).toBeUndefined();
    }
    expect(run.attributes["agentplane.run.status"]).toBe("failed");
  });

  it("a REST call's span is named by its route", async () => {
    const caller = callerTrace();
    const res = await fetch(`${server.url}/api/v1/agents?page_size=1`, { headers: { ...bearer(admin, "acme"), traceparent: traceparent(caller) } });
    expect(res.status).toBe(200);
    const span = await waitFor("the REST span", 5_000, () => spansOf(caller.traceId)[0]);
    expect(span).toMatchObject({ name: "GET /api/v1/agents", kind: SpanKind.SERVER });
    expect(span.attributes).toMatchObject({ "http.route": "/api/v1/agents", "url.path": "/api/v1/agents", "http.response.status_code": 200 });
    expect(parentOf(span)).toBe(caller.spanId);
  });

  it("with no tracer provider (tracing off) records nothing, stores no trace context and sends no traceparent", async () => {
    trace.disable();
    propagation.disable();
    context.disable();
    exporter.reset();
    const agentId = ((await must("CreateAgent", { agent: { name: "untraced", skillIds: [skillId], steps: [{ skillId, tool: "echo", arguments: '{"text": "x"}' }] } })).agent as Json).id as string;
    const sent = mcp.traceparents().length;
    const caller = callerTrace();
    const res = await connectCall(server, "RunAgent", { id: agentId }, { ...bearer(admin, "acme"), traceparent: traceparent(caller) });
    const runId = (res.body.run as Json).id as string;
    const run = await waitFor("the run to end", 15_000, async () => {
      const row = await server.store.runs.get(tenantId, runId);
      return row?.status === "succeeded" ? row : undefined;
    });
    expect(run.traceParent).toBeNull();
    const later = mcp.traceparents().slice(sent);
    expect(later.length).toBeGreaterThan(0);
    expect(later.every((t) => t === "")).toBe(true);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});
