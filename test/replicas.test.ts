// Three `agentplane serve` replicas on one PostgreSQL database, as operators
// scale out: webhooks spread over all three, one replica is killed (SIGKILL)
// while it holds a run's lease, and then every event that got a 202 is
// stored with its run, the dead replica's runs finish on the others, and no
// run was executed by two replicas at once.
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { freeLoopbackPort } from "./support/listen.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { startSigningIdp, type SigningIdp } from "./support/jwks-server.js";
import { createTestDatabase, type TestDatabase } from "./support/postgres.js";
import { PATIENCE_MS, sleep, waitFor } from "./support/wait.js";
import { CliProcess, jwtEnv, platformCall, runCli } from "./support/cli-process.js";
const ISSUER = "https://idp.replicas.test";
const AUDIENCE = "agentplane-replicas";
// The victim's runs come back after its short lease. The survivors keep the
// default lease (30 s): a replica that a loaded machine stalls for longer than
// its lease loses its runs to another replica, which runs them again (with
// the same idempotency keys); with 2 s for all three, a survivor stalled 2.4 s
// ran a run twice. That is the lease doing its job, not what this test is about.
const VICTIM_LEASE_SECONDS = 2;
// Each run calls a tool that takes this long, so a kill can land mid-run.
const TOOL_MS = 30;

describe("three replicas on one PostgreSQL database", () => {
  let database: TestDatabase;
  let sql: postgres.Sql;
  let idp: SigningIdp;
  let customer: CustomerMcp;
  let token: string;
  const secretKey = randomBytes(32).toString("base64");
  // Ends the senders' loops (the test's end, or afterAll when it failed).
  let stop = false;

  const env = (leaseSeconds?: number): Record<string, string> => ({
    AGENTPLANE_DATABASE_URL: database.url,
    AGENTPLANE_DATABASE_POOL_SIZE: "4",
    AGENTPLANE_SECRET_KEY: secretKey,
    ...jwtEnv(idp),
    ...(leaseSeconds ? { AGENTPLANE_RUN_LEASE_SECONDS: String(leaseSeconds) } : {}),
    AGENTPLANE_WORKER_CONCURRENCY: "2",
    AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8",
    AGENTPLANE_WEBHOOK_RATE_PER_SECOND: "1000000",
    AGENTPLANE_WEBHOOK_BURST: "1000000",
    AGENTPLANE_LOG_LEVEL: "warn",
  });

  beforeAll(async () => {
    database = await createTestDatabase();
    sql = postgres(database.url, { max: 2, onnotice: () => {} });
    customer = await startOpenMcp();
    idp = await startSigningIdp(ISSUER, AUDIENCE);
    token = await idp.sign("operator");
  });

  afterAll(async () => {
    // A failed test's senders must not go on posting to dead replicas.
    stop = true;
    await CliProcess.killAll();
    await sql?.end();
    await customer?.close();
    await idp?.close();
    await database?.drop();
  });

  it(
    "loses no acknowledged event when a replica is killed under load, and its leased runs finish elsewhere, once",
    async () => {
      const cliEnv = { AGENTPLANE_DATABASE_URL: database.url };
      await runCli(["tenant", "create", "acme", "--admin", "operator"], cliEnv);
      const { stdout } = await runCli(["source", "create", "acme", "orders"], cliEnv);
      const webhookToken = /whk_[A-Za-z0-9_-]+/.exec(stdout)![0];

      const replicas = await Promise.all(
        [0, 1, 2].map(async (i) => new CliProcess(["serve"], env(i === 1 ? VICTIM_LEASE_SECONDS : undefined), await freeLoopbackPort())),
      );
      await Promise.all(replicas.map((r, i) => r.ready(`replica ${i} to be ready`)));

      const call = <T>(method: string, body: unknown) => platformCall<T>(replicas[0]!, { token, tenant: "acme" }, method, body);
      const { skill } = await call<{ skill: { id: string } }>("CreateSkill", { skill: { name: "tools", mcpUrl: customer.url } });
      const { agent } = await call<{ agent: { id: string } }>("CreateAgent", {
        agent: { name: "a", skillIds: [skill.id], steps: [{ skillId: skill.id, tool: "track", arguments: `{"key": event.id, "ms": ${TOOL_MS}}` }] },
      });
      await call("CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*" } } });

      // The trigger was created through replica 0; every replica must match
      // it within a second (its cache is invalidated by the store).
      await sleep(1_000);

      // Senders spread over the replicas; a replica's failure after its kill
      // is expected, anything else is not.
      const victim = replicas[1]!;
      const accepted = new Set<string>();
      const unexpected: string[] = [];
      let seq = 0;
      const sender = async (i: number) => {
        for (let n = i; !stop; n++) {
          const replica = replicas[n % replicas.length]!;
          if (replica.killSent) continue;
          try {
            const res = await fetch(`${replica.url}/webhooks/events`, {
              method: "POST",
              headers: { "content-type": "application/json", "x-webhook-token": webhookToken, "idempotency-key": `k-${++seq}` },
              body: JSON.stringify({ event_type: "order.created", payload: { n: seq } }),
            });
            const body = (await res.json()) as { event_id?: string };
            if (res.status === 202 && body.event_id) accepted.add(body.event_id);
            else if (!replica.killSent) unexpected.push(`${res.status} ${JSON.stringify(body)}`);
          } catch (err) {
            if (!replica.killSent) unexpected.push(`error: ${(err as Error).message}`);
          }
        }
      };
      const sending = Promise.all(Array.from({ length: 12 }, (_, i) => sender(i)));

      // Kill the victim while it holds a lease: its worker ids carry its pid.
      // 100 events spread over the three replicas give each runs to lease;
      // the 12 senders go on posting through the kill.
      await waitFor("100 accepted events", PATIENCE_MS, () => (accepted.size >= 100 ? true : undefined), 10);
      const pidTag = `-${victim.child.pid}-`;
      const leasedByVictim = async () =>
        (await sql<{ id: string }[]>`select id from runs where status = 'running' and lease_owner like ${"%" + pidTag + "%"}`).map((r) => r.id);
      // Tool calls are held meanwhile, so a run the victim holds cannot end
      // between seeing its lease and the kill, however loaded the machine.
      const release = customer.holdTrack();
      await waitFor("the victim to hold a lease", PATIENCE_MS, async () => ((await leasedByVictim()).length ? true : undefined), 2);
      await victim.kill();
      release();
      const leasedAtKill = await leasedByVictim();
      expect(leasedAtKill.length).toBeGreaterThan(0);

      // The survivors keep taking load for a while, then the senders stop.
      const acceptedAtKill = accepted.size;
      await waitFor("load on the survivors", PATIENCE_MS, () => (accepted.size >= acceptedAtKill + 50 ? true : undefined), 10);
      stop = true;
      await sending;
      expect(unexpected).toEqual([]);

      // Every acknowledged event is stored with exactly one run.
      const stored = new Set((await sql<{ id: string }[]>`select id from events`).map((r) => r.id));
      expect([...accepted].filter((id) => !stored.has(id))).toEqual([]);
      const runCounts = await sql<{ id: string; runs: number }[]>`
        select e.id, count(r.id)::int as runs from events e left join runs r on r.event_id = e.id group by e.id`;
      expect(runCounts.filter((r) => r.runs !== 1)).toEqual([]);

      // Every run succeeds; the victim's leased runs on a later attempt, on a
      // surviving replica (the step records name the worker of each attempt).
      const runs = await waitFor(
        "every run to succeed",
        PATIENCE_MS,
        async () => {
          const pending = await sql<{ n: number }[]>`select count(*)::int as n from runs where status <> 'succeeded'`;
          return pending[0]!.n === 0
            ? sql<{ id: string; event_id: string; attempt: number; steps: { attempt: number; worker: string }[] }[]>`
                select id, event_id, attempt, steps from runs`
            : undefined;
        },
        200,
      );
      expect(runs.length).toBe(stored.size);
      const byId = new Map(runs.map((r) => [r.id, r]));
      for (const id of leasedAtKill) {
        const run = byId.get(id)!;
        expect(run.attempt).toBeGreaterThanOrEqual(2);
        // One step of the attempt that finished, on a survivor; before it,
        // only what the victim's attempt recorded of its step (at its start,
        // so that a live run shows it, and at its end if it got that far).
        const final = run.steps.filter((s) => s.attempt === run.attempt);
        expect(final).toHaveLength(1);
        expect(run.steps.at(-1)).toBe(final[0]);
        expect(final[0]!.worker).not.toContain(pidTag);
        for (const s of run.steps.slice(0, -1)) expect(s.attempt).toBeLessThan(run.attempt);
      }

      // No run executed on two replicas at once: the tool calls of one event
      // never overlap in time, and only the victim's runs ran twice.
      const calls = new Map<string, { start: number; end: number }[]>();
      for (const c of customer.trackedCalls()) calls.set(c.key, [...(calls.get(c.key) ?? []), c]);
      // The victim's runs: those it held at its death, and any it had begun
      // and lost to its short lease before (a stall of the loaded machine).
      const victimEvents = new Set([
        ...leasedAtKill.map((id) => byId.get(id)!.event_id),
        ...runs.filter((r) => r.steps.some((s) => s.worker.includes(pidTag))).map((r) => r.event_id),
      ]);
      // Named with the run's record, so that a failure says which attempts ran it where.
      const byEvent = new Map(runs.map((r) => [r.event_id, r]));
      const twiceElsewhere = [...calls]
        .filter(([eventId, list]) => list.length > 1 && !victimEvents.has(eventId))
        .map(([eventId, list]) => ({ eventId, calls: list, run: byEvent.get(eventId), victim: pidTag }));
      expect(twiceElsewhere).toEqual([]);
      for (const list of calls.values()) {
        if (list.length === 1) continue;
        const sorted = [...list].sort((a, b) => a.start - b.start);
        for (let i = 1; i < sorted.length; i++) expect(sorted[i]!.start).toBeGreaterThanOrEqual(sorted[i - 1]!.end);
      }
      // Each stored event's tool ran (at least once).
      expect([...stored].filter((id) => !calls.has(id))).toEqual([]);

      for (const r of replicas) if (!r.killSent) r.child.kill("SIGTERM");
      await Promise.all(replicas.map((r) => r.exit));
    },
  );
});
