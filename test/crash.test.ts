// Crash recovery of the built `agentplane dev` binary: a SIGKILL during
// webhook load loses no acknowledged event, leaves no event without its run,
// and runs leased by the killed process are claimed again once their lease
// (2 s here) expires, and succeed on the next attempt.
import { join } from "node:path";
import Database from "better-sqlite3";
import { freeLoopbackPort } from "./support/listen.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { PATIENCE_MS, waitFor } from "./support/wait.js";
import { CliProcess, DataDirs, platformCall, runCli } from "./support/cli-process.js";

const LEASE_SECONDS = 2;

// One `agentplane dev` process on a data dir and port.
class DevProcess extends CliProcess {
  // `concurrency`: runs at once; 1 (one run at a time, on any machine) for
  // a process that is killed, more for one that only finishes the runs.
  constructor(
    readonly dataDir: string,
    port: number,
    concurrency = 1,
  ) {
    super(["dev"], {
      AGENTPLANE_DATA_DIR: dataDir,
      AGENTPLANE_RUN_LEASE_SECONDS: String(LEASE_SECONDS),
      AGENTPLANE_WORKER_CONCURRENCY: String(concurrency),
      // One runtime thread.
      AGENTPLANE_WORKER_THREADS: "1",
      // The agent's tool runs on a customer MCP server on loopback.
      AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8",
      // The load below is far above the default 100/s, burst 200 per source.
      AGENTPLANE_WEBHOOK_RATE_PER_SECOND: "1000000",
      AGENTPLANE_WEBHOOK_BURST: "1000000",
      AGENTPLANE_LOG_LEVEL: "warn",
    }, port);
  }
}

const cli = (args: string[], dataDir: string) => runCli(args, { AGENTPLANE_DATA_DIR: dataDir });

const connect = <T>(dev: DevProcess, token: string, method: string, body: unknown) => platformCall<T>(dev, { token, tenant: "dev" }, method, body);

let customer: CustomerMcp;

// An agent with a webhook trigger on order.*, and a source; returns its token.
async function setUp(dev: DevProcess): Promise<string> {
  const token = await dev.devClientToken(await dev.devClient());
  expect(token).toBeTruthy();
  // Each run calls a tool that takes 20 ms (and is held while a kill is
  // made, killWhileLeased), so a run is leased for a while.
  const { skill } = await connect<{ skill: { id: string } }>(dev, token, "CreateSkill", { skill: { name: "tools", mcpUrl: customer.url } });
  const { agent } = await connect<{ agent: { id: string } }>(dev, token, "CreateAgent", {
    agent: { name: "a", skillIds: [skill.id], steps: [{ skillId: skill.id, tool: "track", arguments: '{"key": event.id, "ms": 20}' }] },
  });
  await connect(dev, token, "CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*" } } });
  const { token: webhookToken } = await connect<{ token: string }>(dev, token, "CreateWebhookSource", { webhookSource: { name: "s" } });
  expect(webhookToken).toMatch(/^whk_/);
  return webhookToken;
}

let keySeq = 0;
async function postEvent(dev: DevProcess, webhookToken: string, n: number): Promise<{ status: number; body: { event_id?: string } }> {
  const res = await fetch(`${dev.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": webhookToken, "idempotency-key": `k-${process.pid}-${++keySeq}` },
    body: JSON.stringify({ event_type: "order.created", payload: { n } }),
  });
  return { status: res.status, body: (await res.json()) as { event_id?: string } };
}

interface RunRow {
  id: string;
  event_id: string | null;
  status: string;
  attempt: number;
}

// Reads the database as it is on disk (read-only; WAL lets the server write on).
function readDb<T>(dataDir: string, fn: (db: Database.Database) => T): T {
  const db = new Database(join(dataDir, "agentplane.db"), { readonly: true, fileMustExist: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

const leasedRuns = (dataDir: string) =>
  readDb(dataDir, (db) => db.prepare<[], { id: string }>("select id from runs where status = 'running' order by id").all().map((r) => r.id));

// Kills the process while a run is mid-step: the "track" calls are held, so
// once one waits at the hold its run is leased and cannot end, however
// loaded the machine. Answers the runs leased at the kill, read once the
// process is gone.
async function killWhileLeased(dev: DevProcess): Promise<string[]> {
  const release = customer.holdTrack();
  try {
    await waitFor("a run's tool call to be held", PATIENCE_MS, () => (customer.heldTrackKeys().length ? true : undefined), 2);
    await dev.kill();
  } finally {
    release();
  }
  return leasedRuns(dev.dataDir);
}

const runsByStatus = (dataDir: string) =>
  readDb(dataDir, (db) =>
    Object.fromEntries(
      db
        .prepare<[], { status: string; n: number }>("select status, count(*) as n from runs group by status")
        .all()
        .map((r) => [r.status, r.n]),
    ),
  );

// Waits until every run of the data dir has succeeded.
async function allRunsSucceed(dataDir: string, timeoutMs: number): Promise<RunRow[]> {
  return waitFor(
    "every run to succeed",
    timeoutMs,
    () =>
      readDb(dataDir, (db) => {
        const pending = db.prepare<[], { n: number }>("select count(*) as n from runs where status != 'succeeded'").get()!.n;
        return pending === 0 ? db.prepare<[], RunRow>("select id, event_id, status, attempt from runs").all() : undefined;
      }),
    100,
  );
}

// Posts from `senders` concurrent loops until the process is killed (or has
// died, or a cap is reached); every 202 is recorded, anything else before the
// kill is a failure.
function load(dev: DevProcess, webhookToken: string, senders: number) {
  const accepted = new Set<string>();
  const unexpected: string[] = [];
  let n = 0;
  const sender = async () => {
    while (!dev.killSent && !dev.exited && n < 50_000) {
      try {
        const { status, body } = await postEvent(dev, webhookToken, n++);
        if (status === 202 && body.event_id) accepted.add(body.event_id);
        else if (!dev.killSent) unexpected.push(`${status} ${JSON.stringify(body)}`);
      } catch (err) {
        if (!dev.killSent) unexpected.push(`error before the kill: ${(err as Error).message}`);
      }
    }
  };
  const done = Promise.all(Array.from({ length: senders }, () => sender()));
  return { accepted, unexpected, done };
}

// Loads `dev` from `senders` loops and, once `loaded` says so, kills it
// while a run is leased (killWhileLeased).
async function loadThenKill(dev: DevProcess, webhookToken: string, { senders, loaded }: { senders: number; loaded: (accepted: number, ms: number) => boolean }) {
  const startedAt = Date.now();
  const sending = load(dev, webhookToken, senders);
  await waitFor("the load", PATIENCE_MS, () => (loaded(sending.accepted.size, Date.now() - startedAt) ? true : undefined), 5);
  const leased = await killWhileLeased(dev);
  await sending.done;
  return { leased, accepted: sending.accepted, unexpected: sending.unexpected, loadMs: Date.now() - startedAt };
}

describe("crash recovery (agentplane dev, SIGKILL)", () => {
  const dirs = new DataDirs("agentplane-crash-");

  beforeAll(async () => {
    customer = await startOpenMcp();
  });
  afterAll(async () => {
    await customer?.close();
    await CliProcess.killAll();
    dirs.removeAll();
  });

  it(
    "a SIGKILL under webhook load loses no acknowledged event, and leased runs are claimed again",
    async () => {
      const dataDir = dirs.make();
      const created = await cli(["tenant", "create", "acme"], dataDir);
      expect(created.stdout).toMatch(/created tenant acme \(ten_/);

      const port = await freeLoopbackPort();
      const first = new DevProcess(dataDir, port);
      const webhookToken = await setUp(first);

      // 16 senders; after 300 ms and 100 accepted events, kill while a run
      // is leased (the senders keep going until the kill, so 16 posts are in
      // flight at it: more events before it only mean more runs to wait for
      // after it).
      const sending = await loadThenKill(first, webhookToken, { senders: 16, loaded: (accepted, ms) => ms >= 300 && accepted >= 100 });
      const { leased, loadMs } = sending;
      const acceptedAtKill = sending.accepted.size;
      expect(sending.unexpected).toEqual([]);
      expect(leased.length).toBeGreaterThan(0);

      // The database as the killed process left it.
      const eventsAtKill = readDb(dataDir, (db) => db.prepare<[], { n: number }>("select count(*) as n from events").get()!.n);
      const statusAtKill = runsByStatus(dataDir);

      const second = new DevProcess(dataDir, port, 8);
      await second.devClient();

      // Nothing acknowledged is lost, and every stored event has exactly one run.
      const check = readDb(dataDir, (db) => {
        const stored = new Set(db.prepare<[], { id: string }>("select id from events").all().map((r) => r.id));
        const runCounts = db
          .prepare<[], { id: string; runs: number }>("select e.id, count(r.id) as runs from events e left join runs r on r.event_id = e.id group by e.id")
          .all();
        const orphanRuns = db.prepare<[], { n: number }>("select count(*) as n from runs where event_id is null or event_id not in (select id from events)").get()!.n;
        return { stored, runCounts, orphanRuns };
      });
      expect([...sending.accepted].filter((id) => !check.stored.has(id))).toEqual([]);
      expect(check.runCounts.filter((r) => r.runs !== 1)).toEqual([]);
      expect(check.orphanRuns).toBe(0);

      // Every run succeeds, the ones leased at the kill on a second attempt.
      const runs = await allRunsSucceed(dataDir, PATIENCE_MS);
      expect(runs.length).toBe(check.stored.size);
      const byId = new Map(runs.map((r) => [r.id, r]));
      for (const id of leased) expect(byId.get(id)).toMatchObject({ status: "succeeded", attempt: 2 });
      const retried = runs.filter((r) => r.attempt >= 2).length;
      expect(retried).toBeGreaterThanOrEqual(1);

      console.log(
        `scenario 1: killed after ${loadMs} ms of load, ${acceptedAtKill} events accepted, ` +
          `${eventsAtKill} events stored, runs at kill ${JSON.stringify(statusAtKill)}, ` +
          `${runs.length} runs succeeded after restart, ${retried} with attempt >= 2`,
      );
      await second.kill();
    },
  );

  it(
    "a run leased when its worker is killed ends succeeded on attempt 2",
    async () => {
      const dataDir = dirs.make();
      const port = await freeLoopbackPort();
      const dev = new DevProcess(dataDir, port);
      const webhookToken = await setUp(dev);

      // A few senders keep the one-at-a-time worker busy (they post on until
      // the kill, so runs stay queued behind the leased one); kill it while
      // a run is leased.
      const { leased, accepted, unexpected } = await loadThenKill(dev, webhookToken, { senders: 4, loaded: (n) => n >= 10 });
      expect(unexpected).toEqual([]);
      expect(leased.length).toBeGreaterThan(0);
      const statusAtKill = runsByStatus(dataDir);
      const atKill = readDb(dataDir, (db) =>
        leased.map((id) => db.prepare<[string], { attempt: number; lease_expire_time: number }>("select attempt, lease_expire_time from runs where id = ?").get(id)!),
      );
      expect(atKill.map((r) => r.attempt)).toEqual(leased.map(() => 1));

      const restartedAt = Date.now();
      const after = new DevProcess(dataDir, port, 8);
      await after.devClient();
      const runs = await allRunsSucceed(dataDir, PATIENCE_MS);
      const recoveredMs = Date.now() - restartedAt;
      const byId = new Map(runs.map((r) => [r.id, r]));
      for (const id of leased) expect(byId.get(id)).toMatchObject({ status: "succeeded", attempt: 2 });
      // Taken again only once the dead worker's lease had expired.
      const endTimes = readDb(dataDir, (db) => leased.map((id) => db.prepare<[string], { end_time: number }>("select end_time from runs where id = ?").get(id)!.end_time));
      endTimes.forEach((t, i) => expect(t).toBeGreaterThanOrEqual(atKill[i]!.lease_expire_time));
      expect(runs.filter((r) => r.attempt !== 1 && !leased.includes(r.id))).toEqual([]);

      console.log(
        `scenario 2: ${accepted.size} events accepted, runs at kill ${JSON.stringify(statusAtKill)}, ` +
          `leased ${leased.join(", ")}; all ${runs.length} runs succeeded ${recoveredMs} ms after the restart`,
      );
      await after.kill();
    },
  );
});
