// A client that leaves a live stream while the server is still writing to it
// must free the stream on the server at once, not at the idle end minutes
// later: until then it counts against the caller's cap (a console user who
// reloads the page a few times is locked out). Connect's response writer
// (connect-node 2.1.2) can wait forever on a write to a gone client (a
// socket destroyed before its response closes takes the write without ever
// calling back or emitting 'drain'), and then neither asks the stream for
// its next message nor closes it.
import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { createConnectTransport } from "@connectrpc/connect-web";
import { PlatformService, WatchEventsRequestSchema } from "../gen/platform/v1/platform_service_pb.js";
import { startTwoTenantIdp, type TwoTenantIdp } from "./support/two-tenant-idp.js";
import { bearer, connectCall, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

let idp: TwoTenantIdp;
let server: TestServer;
let api: string;
let token: string;

beforeAll(async () => {
  idp = await startTwoTenantIdp();
  api = idp.token.admin!;
});
afterAll(async () => {
  await idp?.idp.stop();
});

// A server per test: a stream one test leaves open must not pass or fail
// another's count.
beforeEach(async () => {
  // No webhook rate limit: the rounds post their events as fast as they can.
  server = await idp.start({ webhook: { maxBytes: 1 << 20, ratePerSecond: 1e6, burst: 1e6 } });
  token = (await connectCall(server, "CreateWebhookSource", { webhookSource: { name: "shop" } }, bearer(api, "acme"))).body.token as string;
});
afterEach(async () => {
  await server?.close();
});

const openStreams = async () =>
  Number(/^agentplane_streams_open (\d+)/m.exec(await (await fetch(`${server.url}/metrics`)).text())?.[1]);

// agentplane_http_requests_total for WatchEvents, summed over its statuses.
const watchRequests = async () =>
  [...(await (await fetch(`${server.url}/metrics`)).text()).matchAll(/^agentplane_http_requests_total\{[^}]*route="\/platform\.v1\.PlatformService\/WatchEvents"[^}]*\} (\d+)/gm)]
    .map((m) => Number(m[1]))
    .reduce((a, b) => a + b, 0);

const post = async (n: number) => {
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token },
    body: JSON.stringify({ event_type: "order.created", payload: { n } }),
  });
  if (res.status !== 202) throw new Error(`webhook: ${res.status} ${await res.text()}`);
};

const transports: Record<string, () => Transport> = {
  // The console's own client (fetch).
  connect: () => createConnectTransport({ baseUrl: server.url }),
  grpc: () => createGrpcTransport({ baseUrl: server.url }),
  "grpc-web": () => createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" }),
};

// Whether a round catches the server mid-write is a race. Over HTTP/1.1 the
// first round on a fresh server did in every run so far (later ones seldom:
// the server then sends the events before the client leaves); over gRPC's
// HTTP/2 none did, checked all the same. The last test has no race. Each
// round's end is a condition, not a wait.
it.each(Object.keys(transports))("frees a WatchEvents stream over %s whose client leaves while events keep coming", async (protocol) => {
  const client = createClient(PlatformService, transports[protocol]!());
  const counted = await watchRequests();
  for (let round = 0; round < 5; round++) {
    const controller = new AbortController();
    const stream = client.watchEvents({}, { headers: bearer(api, "acme"), signal: controller.signal });
    const received: unknown[] = [];
    const reading = (async () => {
      try {
        for await (const message of stream) {
          // The first message says the stream is open; leave after the next.
          if (received.push(message) === 2) controller.abort();
        }
      } catch {
        // the abort
      }
    })();
    await waitFor("the stream to be open", 10_000, async () => ((await openStreams()) === 1 ? true : undefined));
    // Events keep coming while and after the client leaves.
    await Promise.all(Array.from({ length: 20 }, (_, i) => post(round * 100 + i)));
    await reading;
    await waitFor("the stream to end on the server", 10_000, async () => ((await openStreams()) === 0 ? true : undefined));
    expect(server.store.signals.tenantListeners()).toBe(0);
  }
  // Each stream is a request in the HTTP metrics, though it never finished.
  await waitFor("the streams to be counted", 10_000, async () => ((await watchRequests()) === counted + 5 ? true : undefined));
});

// The same without the race: the platform's stream is ended by its signal
// alone, while its reader holds a message and never asks for the next one
// nor closes it (as Connect's writer stuck on its write does).
it("ends a platform stream when its caller goes away, though its reader never comes back", async () => {
  const { platform } = server.app;
  const controller = new AbortController();
  const stream = platform.stream(PlatformService.method.watchEvents, create(WatchEventsRequestSchema), { token: api, tenant: "acme" }, controller.signal);
  await stream.next(); // open
  // Asked for before the event is stored, as Connect's writer does: the
  // stream follows what is stored from then on.
  const event = stream.next();
  await post(1000);
  expect((await event).done).toBe(false);
  expect(platform.openStreams()).toBe(1);
  controller.abort();
  await waitFor("the stream to end", 10_000, () => (platform.openStreams() === 0 ? true : undefined));
  expect(server.store.signals.tenantListeners()).toBe(0);
  expect(await stream.next()).toEqual({ done: true, value: undefined });
});
