// Lookup caches the store invalidates (issue 10, item 5): two agentplane
// processes' worth of app on one SQLite file. A trigger, source or agent
// created, changed, disabled or deleted through one takes effect on the other
// by the store's change signal, although both serve webhooks from memory; a
// rotated token's grace period ends on time; a new schedule trigger fires its
// first slot. No cached value here expires by time (absences do, after 10 s,
// and no test waits for an absent row to appear), and the other's worker
// poll, lease heartbeat and scheduler refresh are set far beyond SIGNAL_MS:
// what happens within it came by the signal (about 100 ms on an idle
// machine), however loaded the machine is.
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { randomBytes } from "node:crypto";
import { Cron } from "croner";
import { sign as githubSign } from "@octokit/webhooks-methods";
import { noopExecutor, type Executor } from "../src/runtime/executor.js";
import { SecretBox } from "../src/lib/secret-box.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, sourcesChanged, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

type Json = Record<string, unknown>;

const SIGNAL_MS = 30_000;
// The other's slow paths, out of the test's reach.
const SLOW_PATH_MS = 600_000;
const ORDER = { event_type: "order.created", payload: { total: 250 } };

// Both processes' clock: the time, or where a test stopped it.
const clock: { frozen?: number } = {};

let issuer: DevIssuer;
let admin: string;
// `a` makes the changes; `b` opened the same file, as another process.
let a: TestServer;
let b: TestServer;

async function api(server: TestServer, method: string, body: unknown, tenant = "acme"): Promise<Json> {
  const res = await connectCall(server, method, body, bearer(admin, tenant));
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function post(server: TestServer, token: string): Promise<{ status: number; matched?: number }> {
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token },
    body: JSON.stringify(ORDER),
  });
  const body = (await res.json()) as Json;
  return { status: res.status, matched: body.matched_triggers as number | undefined };
}

// Polls until `check` holds, for at most `ms` from now; how long it took.
async function within(check: () => Promise<boolean>, ms = SIGNAL_MS): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// One change signal on `s` that webhook sources changed.
const matchedOn = (server: TestServer, token: string, n: number) => async () => (await post(server, token)).matched === n;
const statusOn = (server: TestServer, token: string, status: number) => async () => (await post(server, token)).status === status;

let agentId: string;

// `b` executes runs: at once, except those of the blocking agent, which wait
// to be cancelled (when each was aborted is kept).
let blockingAgentId = "";
const aborted = new Map<string, number>();
const executor: Executor = {
  async execute(run, ctx) {
    if (run.agentId !== blockingAgentId) return noopExecutor.execute(run, ctx);
    await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
    aborted.set(run.id, Date.now());
    return { status: "failed", error: "aborted" };
  },
};

async function newSource(name: string): Promise<{ id: string; token: string }> {
  const body = await api(a, "CreateWebhookSource", { webhookSource: { name } });
  return { id: (body.webhookSource as Json).id as string, token: body.token as string };
}

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  const options = {
    authenticator: issuer.authenticator(60),
    webhook: { maxBytes: 1 << 20, ratePerSecond: 1e6, burst: 1e6 },
    secrets: new SecretBox(randomBytes(32)),
    // The schedule test fires every second, not to wait a minute per slot.
    scheduleMinIntervalSeconds: 1,
    now: () => clock.frozen ?? Date.now(),
  };
  a = await startServer(options);
  b = await startServer({
    ...options,
    dir: a.dir,
    // A 30-minute lease: its heartbeat, which also finds cancelled runs, every 10 minutes.
    runtime: { scheduler: true, executor, idlePollMs: SLOW_PATH_MS, leaseMs: 3 * SLOW_PATH_MS, scheduleRefreshMs: SLOW_PATH_MS },
  });
  await a.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  agentId = ((await api(a, "CreateAgent", { agent: { name: "a", model: PLACEHOLDER_MODEL } })).agent as Json).id as string;
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

describe("a trigger changed through one process", () => {
  let source: { id: string; token: string };
  let triggerId: string;

  beforeAll(async () => {
    source = await newSource("triggers");
    // Both have the source and its (empty) triggers cached.
    expect(await post(a, source.token)).toEqual({ status: 202, matched: 0 });
    expect(await post(b, source.token)).toEqual({ status: 202, matched: 0 });
  });

  it("is matched once created, at once here and on the other by the change signal", async () => {
    const body = await api(a, "CreateTrigger", { trigger: { agentId, webhook: { sourceId: source.id, eventTypePattern: "order.*" } } });
    triggerId = (body.trigger as Json).id as string;
    expect((await post(a, source.token)).matched).toBe(1);
    await within(matchedOn(b, source.token, 1));
  });

  it("is not matched once disabled, and again once enabled", async () => {
    await api(a, "UpdateTrigger", { trigger: { id: triggerId, enabled: false } });
    expect((await post(a, source.token)).matched).toBe(0);
    await within(matchedOn(b, source.token, 0));
    await api(a, "UpdateTrigger", { trigger: { id: triggerId, enabled: true } });
    await within(matchedOn(b, source.token, 1));
  });

  it("follows a changed pattern", async () => {
    await api(a, "UpdateTrigger", { trigger: { id: triggerId, webhook: { sourceId: source.id, eventTypePattern: "invoice.*" } } });
    await within(matchedOn(b, source.token, 0));
    await api(a, "UpdateTrigger", { trigger: { id: triggerId, webhook: { sourceId: source.id, eventTypePattern: "**" } } });
    await within(matchedOn(b, source.token, 1));
  });

  it("is not matched once its agent is disabled", async () => {
    await api(a, "UpdateAgent", { agent: { id: agentId, enabled: false } });
    await within(matchedOn(b, source.token, 0));
    await api(a, "UpdateAgent", { agent: { id: agentId, enabled: true } });
    await within(matchedOn(b, source.token, 1));
  });

  it("is not matched once deleted", async () => {
    await api(a, "DeleteTrigger", { id: triggerId });
    expect((await post(a, source.token)).matched).toBe(0);
    await within(matchedOn(b, source.token, 0));
  });
});

describe("a webhook source changed through one process", () => {
  it("is refused once disabled, and accepted again once enabled", async () => {
    const source = await newSource("toggled");
    expect((await post(b, source.token)).status).toBe(202);
    await api(a, "UpdateWebhookSource", { webhookSource: { id: source.id, enabled: false } });
    expect((await post(a, source.token)).status).toBe(401);
    await within(statusOn(b, source.token, 401));
    await api(a, "UpdateWebhookSource", { webhookSource: { id: source.id, enabled: true } });
    await within(statusOn(b, source.token, 202));
  });

  it("refuses a token rotated without grace, and accepts the new one", async () => {
    const source = await newSource("rotated");
    expect((await post(b, source.token)).status).toBe(202);
    const rotated = await api(a, "RotateWebhookSourceToken", { id: source.id, gracePeriod: "0s" });
    expect((await post(a, source.token)).status).toBe(401);
    await within(statusOn(b, source.token, 401));
    expect((await post(b, rotated.token as string)).status).toBe(202);
  });

  it("refuses a deleted source's token", async () => {
    const source = await newSource("deleted");
    expect((await post(b, source.token)).status).toBe(202);
    await api(a, "DeleteWebhookSource", { id: source.id });
    await within(statusOn(b, source.token, 401));
  });

  it("ends a rotated token's grace period on time, with no change to tell it", async () => {
    const source = await newSource("grace");
    expect((await post(b, source.token)).status).toBe(202);
    // Both processes' clock stands still through the grace period, then
    // steps to its last millisecond and to its end.
    clock.frozen = Date.now();
    try {
      // Any later change to webhook sources has dropped `b`'s cached row:
      // what it caches next is the rotated one.
      const signalled = sourcesChanged(b);
      const rotated = await api(a, "RotateWebhookSourceToken", { id: source.id, gracePeriod: "2s" });
      const expires = Date.parse((rotated.webhookSource as Json).previousTokenExpireTime as string);
      expect(expires).toBe(clock.frozen + 2000);
      await signalled;
      // Both tokens are accepted (and cached) in the grace period...
      for (const server of [a, b]) {
        expect((await post(server, source.token)).status).toBe(202);
        expect((await post(server, rotated.token as string)).status).toBe(202);
      }
      clock.frozen = expires - 1;
      for (const server of [a, b]) expect((await post(server, source.token)).status).toBe(202);
      // ...and the old one is refused as soon as it ends.
      clock.frozen = expires;
      for (const server of [a, b]) {
        expect((await post(server, source.token)).status).toBe(401);
        expect((await post(server, rotated.token as string)).status).toBe(202);
      }
    } finally {
      clock.frozen = undefined;
    }
  });
});

// A signed source is served from a cache by id (the delivery's URL names it).
describe("a signed webhook source changed through one process", () => {
  // A push of its own each time: GitHub deliveries are keyed by their body.
  let pushes = 0;
  const deliver = async (server: TestServer, url: string, secret: string) => {
    const body = JSON.stringify({ ref: "refs/heads/main", after: `sha-${++pushes}` });
    const path = new URL(url).pathname;
    const res = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-github-event": "push", "x-hub-signature-256": await githubSign(secret, body) },
      body,
    });
    return res.status;
  };
  const signedOn = (server: TestServer, url: string, secret: string, status: number) => async () => (await deliver(server, url, secret)) === status;

  it("is refused once disabled, and verifies only the new secret once rotated without grace", async () => {
    const created = await api(a, "CreateWebhookSource", { webhookSource: { name: "gh", kind: "WEBHOOK_SOURCE_KIND_GITHUB" } });
    const { id, url } = created.webhookSource as { id: string; url: string };
    const secret = created.signingSecret as string;
    expect(await deliver(b, url, secret)).toBe(202);
    await api(a, "UpdateWebhookSource", { webhookSource: { id, enabled: false } });
    await within(signedOn(b, url, secret, 401));
    await api(a, "UpdateWebhookSource", { webhookSource: { id, enabled: true } });
    await within(signedOn(b, url, secret, 202));
    const rotated = await api(a, "RotateWebhookSourceSigningSecret", { id, gracePeriod: "0s" });
    await within(signedOn(b, url, secret, 401));
    expect(await deliver(b, url, rotated.signingSecret as string)).toBe(202);
  });
});

describe("runs queued or cancelled through one process", () => {
  const runsOf = async (triggerId: string) => ((await api(a, "ListRuns", { triggerId })).runs as Json[] | undefined) ?? [];

  it("are started by the other's worker on the change signal, not at its next poll", async () => {
    const source = await newSource("queued");
    const trigger = (await api(a, "CreateTrigger", { trigger: { agentId, webhook: { sourceId: source.id, eventTypePattern: "order.*" } } }))
      .trigger as Json;
    // `a` has no worker: only `b` runs them, and it polls once in 10 minutes.
    for (let i = 1; i <= 3; i++) {
      expect((await post(a, source.token)).matched).toBe(1);
      await within(async () => (await runsOf(trigger.id as string)).filter((r) => r.status === "RUN_STATUS_SUCCEEDED").length === i);
    }
  });

  it("are aborted on the other on the change signal, not at its next heartbeat", async () => {
    blockingAgentId = ((await api(a, "CreateAgent", { agent: { name: "blocking", model: PLACEHOLDER_MODEL } })).agent as Json).id as string;
    const source = await newSource("cancelled");
    const trigger = (
      await api(a, "CreateTrigger", { trigger: { agentId: blockingAgentId, webhook: { sourceId: source.id, eventTypePattern: "order.*" } } })
    ).trigger as Json;
    expect((await post(a, source.token)).matched).toBe(1);
    let runId = "";
    await within(async () => {
      const running = (await runsOf(trigger.id as string)).find((r) => r.status === "RUN_STATUS_RUNNING");
      runId = (running?.id as string | undefined) ?? "";
      return running !== undefined;
    });
    await api(a, "CancelRun", { id: runId });
    await within(async () => aborted.has(runId));
  });
});

describe("a schedule trigger created through one process", () => {
  const create = async (cron: string) => (await api(a, "CreateTrigger", { trigger: { agentId, schedule: { cron } } })).trigger as Json;
  const slotsOf = async (trigger: Json) =>
    ((await api(a, "ListRuns", { triggerId: trigger.id })).runs as Json[] | undefined)?.map((r) => (r.input as Json).scheduled_time as string) ?? [];

  it("fires its first slot on the other", async () => {
    // Once a minute, a few seconds from now: `b`, the only process with a
    // scheduler, fires the first slot if it ticks within the minute after it
    // (else the next), which any load allows. It ticks that soon only if the
    // change signal told it of the trigger: its refresh is 10 minutes away.
    const cron = `${new Date(Date.now() + 3000).getSeconds()} * * * * *`;
    const trigger = await create(cron);
    const firstSlot = new Cron(cron, { paused: true }).nextRun(new Date(Date.parse(trigger.createTime as string)))!.getTime();
    await within(async () => (await slotsOf(trigger)).includes(new Date(firstSlot).toISOString()), firstSlot - Date.now() + SIGNAL_MS);
    await api(a, "UpdateTrigger", { trigger: { id: trigger.id, enabled: false } });
  }, 180_000);

  it("stops firing on the other once disabled", async () => {
    const trigger = await create("* * * * * *");
    await within(async () => (await slotsOf(trigger)).length > 0);
    await api(a, "UpdateTrigger", { trigger: { id: trigger.id, enabled: false } });
    const fired = (await slotsOf(trigger)).length;
    // A tick under way may have read the trigger before the change: one slot
    // more at most. Still enabled, it would fire about three.
    await new Promise((r) => setTimeout(r, 3000));
    expect((await slotsOf(trigger)).length).toBeLessThanOrEqual(fired + 1);
  });
});
