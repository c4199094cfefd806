// Schedules a tenant cannot turn into a flood (issue 19 item 8): a cron
// that fires more often than the minimum interval (a minute unless
// configured) is refused, and a slot skipped at the queued-runs quota warns
// once a minute per trigger, not once per slot. Nor can a tenant that keeps
// changing its triggers make the scheduler read every tenant's schedules
// back to back.
import { Writable } from "node:stream";
import pino from "pino";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { Scheduler } from "../src/runtime/scheduler.js";
import type { CachedTable, ScheduleStore } from "../src/store/store.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";
import { bearer, connectCall, connectMust, startServer, type TestServer, type TestServerOptions } from "./support/server.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let admin: string;
beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
});

async function server(options: Partial<TestServerOptions> = {}): Promise<{ s: TestServer; agentId: string }> {
  const s = await startServer({ authenticator: issuer.authenticator(60), ...options });
  await s.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  const { agent } = (await connectMust(s, "CreateAgent", { agent: { name: "a", model: PLACEHOLDER_MODEL } }, bearer(admin, "acme"))) as { agent: Json };
  return { s, agentId: agent.id as string };
}

const schedule = (s: TestServer, agentId: string, cron: string) =>
  connectCall(s, "CreateTrigger", { trigger: { agentId, schedule: { cron, timezone: "UTC" } } }, bearer(admin, "acme"));

describe("the minimum interval of a schedule", () => {
  let s: TestServer;
  let agentId: string;
  beforeAll(async () => ({ s, agentId } = await server()));
  afterAll(() => s.close());

  it.each([
    ["* * * * * *", "1 s"],
    ["*/30 * * * * *", "30 s"],
    ["0,59 * * * * *", "1 s"],
    ["10-12 5 * * * *", "1 s"],
  ])("refuses %s (slots %s apart)", async (cron, apart) => {
    const res = await schedule(s, agentId, cron);
    expect({ status: res.status, body: res.body }).toEqual({
      status: 400,
      body: {
        code: "invalid_argument",
        message: `trigger.schedule.cron: "${cron}" fires ${apart} apart; schedules fire at most once every 60 s (AGENTPLANE_SCHEDULE_MIN_INTERVAL_SECONDS)`,
      },
    });
  });

  it.each(["* * * * *", "0 * * * * *", "*/5 * * * *", "0 9 * * 1-5", "30 0,1 * * * *"])("accepts %s", async (cron) => {
    expect((await schedule(s, agentId, cron)).status).toBe(200);
  });

  it("takes the minimum from its setting", async () => {
    const fast = await server({ scheduleMinIntervalSeconds: 1 });
    try {
      expect((await schedule(fast.s, fast.agentId, "* * * * * *")).status).toBe(200);
    } finally {
      await fast.s.close();
    }
  });
});

describe("a schedule at the queued-runs quota", () => {
  it("warns once a minute per trigger, saying how many slots it held back", async () => {
    const quotas = { agents: 10, skills: 10, triggers: 10, webhookSources: 10, members: 10, queuedRuns: 1 };
    const { s, agentId } = await server({ quotas, scheduleMinIntervalSeconds: 1 });
    try {
      await connectMust(s, "RunAgent", { id: agentId }, bearer(admin, "acme"));
      const created = await schedule(s, agentId, "* * * * * *");
      const triggerId = ((created.body.trigger as Json).id as string) ?? "";
      const lines: Json[] = [];
      const log = pino({ level: "warn" }, new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(JSON.parse(chunk.toString()) as Json), done()) }));
      // The scheduler's clock is the test's: 150 one-second slots.
      const start = Math.ceil(Date.parse((created.body.trigger as Json).createTime as string) / 1000) * 1000 + 1000;
      let now = start;
      const scheduler = new Scheduler({ store: s.store.schedules, log, maxQueuedRuns: quotas.queuedRuns, now: () => now });
      for (let i = 0; i < 150; i++, now += 1000) expect((await scheduler.tick(now)).fired).toBe(0);
      expect(lines.map((l) => ({ triggerId: l.triggerId, held: l.held }))).toEqual([
        { triggerId, held: 0 },
        { triggerId, held: 59 },
        { triggerId, held: 59 },
      ]);
    } finally {
      await s.close();
    }
  });
});

describe("a scheduler told of changes", () => {
  // Each tick reads every tenant's schedule triggers. The scheduler's clock
  // is the test's; each change is signalled once the tick before it ended.
  it("ticks on a change at once, then at most once per gap however many changes follow", async () => {
    let now = 1_000_000;
    let reads = 0;
    let signal: (table: CachedTable) => void = () => {};
    const store: ScheduleStore = {
      scheduleTriggers: async () => (reads++, []),
      fireSlot: async () => "taken",
    };
    const scheduler = new Scheduler({
      store,
      log: pino({ level: "silent" }),
      now: () => now,
      signalGapMs: 60_000,
      signals: { onChanged: (listener) => ((signal = listener), () => {}) },
    });
    // A tick's continuations have run once the next macrotask does.
    const settled = () => new Promise((resolve) => setImmediate(resolve));
    try {
      scheduler.start();
      await settled();
      expect(reads).toBe(1);
      // Within the gap: none of a hundred changes starts a tick.
      for (let i = 0; i < 100; i++) {
        now += 100;
        signal("triggers");
        await settled();
      }
      expect(reads).toBe(1);
      // Past it, the next change ticks at once; a source's change never does.
      now += 60_000;
      signal("webhook_sources");
      await settled();
      expect(reads).toBe(1);
      signal("agents");
      await settled();
      expect(reads).toBe(2);
    } finally {
      scheduler.stop();
    }
  });
});
