// A refusal that says when to come back says it on every surface: the
// source's rate limit refused over Connect, the REST mirror, the platform MCP
// endpoint and the webhook endpoint each carries `Retry-After`, because all
// of them answer through one mapping of service errors to HTTP.
import { startTwoTenantIdp, type TwoTenantIdp } from "./support/two-tenant-idp.js";
import { bearer, connectCall, type TestServer } from "./support/server.js";

type Json = Record<string, unknown>;

let idp: TwoTenantIdp;
let server: TestServer;
let api: string;
let mcp: string;
// Each test spends a source of its own: one event admitted, the next refused.
const sources: { id: string; token: string }[] = [];

beforeAll(async () => {
  idp = await startTwoTenantIdp();
  api = idp.token.admin!;
  mcp = idp.token.adminMcp!;
  // A bucket of one token refilled every 100 s: the second event is refused.
  server = await idp.start({ webhook: { maxBytes: 4096, ratePerSecond: 0.01, burst: 1 } });
  for (let i = 0; i < 4; i++) {
    const res = await connectCall(server, "CreateWebhookSource", { webhookSource: { name: `shop-${i}` } }, bearer(api, "acme"));
    sources.push({ id: (res.body.webhookSource as Json).id as string, token: res.body.token as string });
  }
});
afterAll(async () => {
  await server?.close();
  await idp?.idp.stop();
});

const EVENT = { eventType: "order.created", payload: { id: "o-1" } };
const LIMITED = { code: "resource_exhausted", message: "rate limit exceeded for this webhook source" };
const retryAfter = (headers: Headers) => Number(headers.get("retry-after"));

it("Connect: a 429 carries Retry-After", async () => {
  const { id } = sources[0]!;
  expect((await connectCall(server, "SendWebhookSourceTestEvent", { id, ...EVENT }, bearer(api, "acme"))).status).toBe(200);
  const limited = await connectCall(server, "SendWebhookSourceTestEvent", { id, ...EVENT }, bearer(api, "acme"));
  expect({ status: limited.status, body: limited.body }).toEqual({ status: 429, body: LIMITED });
  expect(retryAfter(limited.headers)).toBeGreaterThanOrEqual(1);
});

it("REST: a 429 carries Retry-After", async () => {
  const { id } = sources[1]!;
  const send = () =>
    fetch(`${server.url}/api/v1/webhook-sources/${id}/send-test-event`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(api, "acme") },
      body: JSON.stringify(EVENT),
    });
  expect((await send()).status).toBe(200);
  const limited = await send();
  expect({ status: limited.status, body: await limited.json() }).toEqual({ status: 429, body: LIMITED });
  expect(retryAfter(limited.headers)).toBeGreaterThanOrEqual(1);
});

// A tool's failure is a tool result the model reads (HTTP 200, `isError`),
// not an HTTP error: the result names the code and when to retry, and the
// HTTP answer carries the same Retry-After for whatever sits in between.
it("MCP: a resource_exhausted tool result carries Retry-After", async () => {
  const { id } = sources[2]!;
  const send = async () => {
    const res = await fetch(`${server.url}/mcp?tenant=acme`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18", ...bearer(mcp) },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "send_webhook_source_test_event", arguments: { id, ...EVENT } } }),
    });
    return { status: res.status, headers: res.headers, result: ((await res.json()) as { result: Json }).result };
  };
  expect((await send()).result.isError).toBeFalsy();
  const limited = await send();
  expect(limited.status).toBe(200);
  expect(limited.result).toMatchObject({ isError: true, structuredContent: { error: { ...LIMITED, retry_after: expect.stringMatching(/^[1-9]\d*$/) } } });
  expect(retryAfter(limited.headers)).toBeGreaterThanOrEqual(1);
});

it("webhooks: a 429 carries Retry-After", async () => {
  const { token } = sources[3]!;
  const post = () =>
    fetch(`${server.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": token },
      body: JSON.stringify({ event_type: "order.created", payload: {} }),
    });
  expect((await post()).status).toBe(202);
  const limited = await post();
  expect({ status: limited.status, body: await limited.json() }).toEqual({ status: 429, body: { error: LIMITED.code, message: LIMITED.message } });
  expect(retryAfter(limited.headers)).toBeGreaterThanOrEqual(1);
});
