// A database crash is an outage, never a crash loop (issue 19 item 6). A
// private PostgreSQL cluster (never the shared server) is crashed under
// webhook load with runs in flight (`pg_ctl stop -m immediate`) and started
// again: `serve` and its runtime thread live through it, /readyz and
// webhooks answer 503 while it is down and 200 / 202 again by themselves
// once it is back, no acknowledged event is lost and every run, the ones in
// flight at the crash included, ends succeeded. Then a SQLite file held
// locked by another process: /readyz and webhooks 503 while it lasts, 200 /
// 202 after, nothing lost.
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import { join } from "node:path";
import postgres from "postgres";
import { startPrivatePostgres, type PrivatePostgres } from "../bench/lib/private-postgres.js";
import { CliProcess, DataDirs, jwtEnv, platformCall, runCli } from "./support/cli-process.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { startSigningIdp, type SigningIdp } from "./support/jwks-server.js";
import { freeLoopbackPort } from "./support/listen.js";
import { sleep, waitFor } from "./support/wait.js";

const ISSUER = "https://idp.outage.test";
const AUDIENCE = "agentplane-outage";
const LEASE_SECONDS = 2;
// Each run's tool call takes this long, so that the crash finds runs in flight.
const TOOL_MS = 100;
// Recovery must come by itself; this bound only has to hold on a 2-core
// machine at load average 15 (the bench measures the real figure).
const RECOVERY_MS = 30_000;

interface Sent {
  status: number;
  eventId?: string;
}

// Posts events to `url` from `senders` loops until stopped; every answer is
// kept. Paced: every event is a run to drain at the end, and a few hundred
// prove as much as a few thousand.
function webhookLoad(url: string, token: string, senders = 2) {
  const answers: Sent[] = [];
  let stop = false;
  let seq = 0;
  const loops = Array.from({ length: senders }, async () => {
    while (!stop) {
      const key = `k-${++seq}`;
      try {
        const res = await fetch(`${url}/webhooks/events`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-webhook-token": token, "idempotency-key": key },
          body: JSON.stringify({ event_type: "order.created", payload: { key } }),
        });
        const body = (await res.json()) as { event_id?: string };
        answers.push({ status: res.status, eventId: res.status === 202 ? body.event_id : undefined });
      } catch {
        answers.push({ status: 0 });
      }
      await sleep(50);
    }
  });
  return {
    answers,
    accepted: () => answers.filter((a) => a.eventId !== undefined).map((a) => a.eventId!),
    async stop() {
      stop = true;
      await Promise.all(loops);
    },
  };
}

async function statusOf(url: string, init?: RequestInit): Promise<number> {
  return fetch(url, init).then(
    async (r) => (await r.arrayBuffer(), r.status),
    () => 0,
  );
}

describe("a database outage", () => {
  let idp: SigningIdp;
  let customer: CustomerMcp;
  let operatorToken: string;
  const secretKey = randomBytes(32).toString("base64");
  const baseEnv = (): Record<string, string> => ({
    AGENTPLANE_SECRET_KEY: secretKey,
    ...jwtEnv(idp),
    AGENTPLANE_RUN_LEASE_SECONDS: String(LEASE_SECONDS),
    AGENTPLANE_WORKER_THREADS: "1",
    AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8",
    AGENTPLANE_WEBHOOK_RATE_PER_SECOND: "1000000",
    AGENTPLANE_WEBHOOK_BURST: "1000000",
    AGENTPLANE_LOG_LEVEL: "warn",
  });

  // A tenant with a webhook source and a trigger whose agent calls the slow tool.
  async function setUp(serve: CliProcess): Promise<string> {
    const call = <T>(method: string, body: unknown) => platformCall<T>(serve, { token: operatorToken, tenant: "acme" }, method, body);
    const { skill } = await call<{ skill: { id: string } }>("CreateSkill", { skill: { name: "tools", mcpUrl: customer.url } });
    const { agent } = await call<{ agent: { id: string } }>("CreateAgent", {
      agent: { name: "a", skillIds: [skill.id], steps: [{ skillId: skill.id, tool: "track", arguments: `{"key": event.id, "ms": ${TOOL_MS}}` }] },
    });
    await call("CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*" } } });
    const { token } = await call<{ token: string }>("CreateWebhookSource", { webhookSource: { name: "orders" } });
    return token;
  }

  // What the process wrote must show it survived: no thread restarted, no
  // driver TypeError, and each loop logged its failure once, not per try.
  function expectSurvived(serve: CliProcess): void {
    expect(serve.exited).toBe(false);
    expect(serve.output).not.toMatch(/runtime thread exited/);
    expect(serve.output).not.toMatch(/Cannot read properties of null/);
    expect(serve.output.match(/run queue claim failed/g)?.length ?? 0).toBeLessThanOrEqual(1);
  }

  beforeAll(async () => {
    customer = await startOpenMcp();
    idp = await startSigningIdp(ISSUER, AUDIENCE);
    operatorToken = await idp.sign("operator");
  });

  afterAll(async () => {
    await CliProcess.killAll();
    await customer?.close();
    await idp?.close();
  });

  describe("on PostgreSQL (a private cluster, crashed)", () => {
    let cluster: PrivatePostgres;
    let sql: postgres.Sql;

    beforeAll(async () => {
      cluster = await startPrivatePostgres();
      sql = postgres(cluster.url, { max: 1, onnotice: () => {} });
    });

    afterAll(async () => {
      await CliProcess.killAll();
      await sql?.end({ timeout: 1 });
      await cluster?.destroy();
    });

    it(
      "answers 503 while the database is down and 202 again by itself after, losing no acknowledged event and no run in flight",
      async () => {
        await runCli(["tenant", "create", "acme", "--admin", "operator"], { AGENTPLANE_DATABASE_URL: cluster.url });
        const serve = new CliProcess(["serve"], { ...baseEnv(), AGENTPLANE_DATABASE_URL: cluster.url, AGENTPLANE_DATABASE_POOL_SIZE: "4" }, await freeLoopbackPort());
        await serve.ready("serve to be ready");
        const token = await setUp(serve);
        const load = webhookLoad(serve.url, token);

        // Crash while runs are executing.
        const running = async () => (await sql<{ id: string }[]>`select id from runs where status = 'running'`).map((r) => r.id);
        const inFlight = await waitFor("runs in flight", 30_000, async () => {
          const ids = await running();
          return ids.length ? ids : undefined;
        });
        await cluster.crash();

        // Down: not ready, and webhooks are refused as unavailable (not 500, not hanging).
        await waitFor("/readyz to answer 503", RECOVERY_MS, async () => ((await statusOf(`${serve.url}/readyz`)) === 503 ? true : undefined));
        const downAt = load.answers.length;
        await waitFor("a webhook answered 503", RECOVERY_MS, () => (load.answers.slice(downAt).some((a) => a.status === 503) ? true : undefined));
        // Long enough for held leases to lapse while it is down.
        await sleep(LEASE_SECONDS * 1000);

        await cluster.start();
        const backAt = performance.now();
        await waitFor("/readyz to answer 200 again", RECOVERY_MS, async () => ((await statusOf(`${serve.url}/readyz`)) === 200 ? true : undefined));
        const readyAfterMs = performance.now() - backAt;
        const upAt = load.answers.length;
        await waitFor("a webhook answered 202 again", RECOVERY_MS, () => (load.answers.slice(upAt).some((a) => a.status === 202) ? true : undefined));
        await sleep(500);
        await load.stop();

        // Nothing but 202 and 503 was answered, and never no answer at all.
        expect(new Set(load.answers.map((a) => a.status))).toEqual(new Set([202, 503]));
        // Every acknowledged event is stored and its run succeeded, the runs in flight at the crash too.
        const accepted = load.accepted();
        await waitFor("every acknowledged event's run to succeed", 120_000, async () => {
          const [row] = await sql<{ n: number }[]>`
            select count(*)::int as n from runs where event_id = any(${accepted}) and status = 'succeeded'`;
          return row!.n === accepted.length ? true : undefined;
        });
        const [stored] = await sql<{ n: number }[]>`select count(*)::int as n from events where id = any(${accepted})`;
        expect(stored!.n).toBe(accepted.length);
        const crashed = await sql<{ status: string }[]>`select status from runs where id = any(${inFlight})`;
        expect(crashed.map((r) => r.status)).toEqual(inFlight.map(() => "succeeded"));
        expectSurvived(serve);
        console.log(`PostgreSQL outage: /readyz 200 ${Math.round(readyAfterMs)} ms after the database accepted connections again`);
        await serve.stop();
      },
      240_000,
    );
  });

  describe("on SQLite (the file locked by another process)", () => {
    const dirs = new DataDirs("agentplane-outage-");

    afterAll(() => dirs.removeAll());

    it(
      "answers 503 on /readyz and webhooks while another process holds the write lock, 200 and 202 after, losing nothing",
      async () => {
        const dir = await dirs.withTenant("acme", "operator");
        const serve = new CliProcess(["serve"], { ...baseEnv(), AGENTPLANE_DATA_DIR: dir }, await freeLoopbackPort());
        await serve.ready("serve to be ready");
        const token = await setUp(serve);
        const load = webhookLoad(serve.url, token);
        const db = new Database(join(dir, "agentplane.db"));
        try {
          await waitFor("runs in flight", 30_000, () => (db.prepare("select count(*) as n from runs where status = 'running'").get() as { n: number }).n > 0 || undefined);
          // Another process takes the write lock and keeps it.
          db.exec("begin exclusive");
          const lockedAt = load.answers.length;
          await waitFor("a webhook answered 503", RECOVERY_MS, () => (load.answers.slice(lockedAt).some((a) => a.status === 503) ? true : undefined));
          // Reads still work in WAL mode; readiness is about taking writes.
          expect(await statusOf(`${serve.url}/readyz`)).toBe(503);
          await sleep(LEASE_SECONDS * 1000);
          db.exec("rollback");
          const freeAt = load.answers.length;
          await waitFor("a webhook answered 202 again", RECOVERY_MS, () => (load.answers.slice(freeAt).some((a) => a.status === 202) ? true : undefined));
          await waitFor("/readyz to answer 200 again", RECOVERY_MS, async () => ((await statusOf(`${serve.url}/readyz`)) === 200 ? true : undefined));
          await load.stop();

          expect(new Set(load.answers.map((a) => a.status))).toEqual(new Set([202, 503]));
          const accepted = load.accepted();
          const succeeded = () =>
            (db.prepare(`select count(*) as n from runs where status = 'succeeded' and event_id in (select value from json_each(?))`).get(JSON.stringify(accepted)) as { n: number }).n;
          await waitFor("every acknowledged event's run to succeed", 120_000, () => (succeeded() === accepted.length ? true : undefined));
          expectSurvived(serve);
        } finally {
          db.close();
        }
        await serve.stop();
      },
      240_000,
    );
  });
});
