// The queued-runs quota holds under a burst (issue 19 item 7): webhook
// senders posting at once, on one process or on two replicas of one
// PostgreSQL database, never queue more runs than the cap, and every event
// that was acknowledged (202) has its run.
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectMust, sqliteRows, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";
import postgres from "postgres";

type Json = Record<string, unknown>;
const CAP = 100;
const POSTS = 600;
const OVER = { error: "resource_exhausted", message: `tenant acme has ${CAP} queued runs, the limit (AGENTPLANE_QUOTA_QUEUED_RUNS)` };

let issuer: DevIssuer;
let admin: string;

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
});

const options = (store: "sqlite" | "postgres") => ({
  authenticator: issuer.authenticator(60),
  store,
  quotas: { agents: 10, skills: 10, triggers: 10, webhookSources: 10, members: 10, queuedRuns: CAP },
  webhook: { maxBytes: 1 << 16, ratePerSecond: 1_000_000, burst: 1_000_000 },
  // Batches of many events, as under load: the check must count what the
  // same batch already adds.
  groupCommit: { windowMs: 5, maxBatch: 256 },
});

// An agent with a webhook trigger on order.*, and a source's token.
async function setUp(s: TestServer): Promise<string> {
  await s.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  const auth = bearer(admin, "acme");
  const { agent } = (await connectMust(s, "CreateAgent", { agent: { name: "a", model: PLACEHOLDER_MODEL } }, auth)) as { agent: { id: string } };
  await connectMust(s, "CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*" } } }, auth);
  return (await connectMust(s, "CreateWebhookSource", { webhookSource: { name: "shop" } }, auth)).token as string;
}

async function post(url: string, token: string, n: number): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token },
    body: JSON.stringify({ event_type: "order.created", payload: { n } }),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

// Every post at once, spread over the servers' URLs.
async function burst(urls: string[], token: string) {
  const answers = await Promise.all(Array.from({ length: POSTS }, (_, i) => post(urls[i % urls.length]!, token, i)));
  const accepted = answers.filter((a) => a.status === 202);
  const refused = answers.filter((a) => a.status !== 202);
  return { accepted: accepted.map((a) => a.body.event_id as string), refused };
}

function expectHeld(result: Awaited<ReturnType<typeof burst>>, queued: { eventId: string }[]) {
  expect(queued.length).toBeLessThanOrEqual(CAP);
  // Acknowledged means stored with its run; refused means nothing stored.
  expect(queued.map((r) => r.eventId).sort()).toEqual([...result.accepted].sort());
  expect(result.refused.length).toBe(POSTS - result.accepted.length);
  for (const r of result.refused) expect(r).toEqual({ status: 429, body: OVER });
  // The cap is reached, not merely respected by refusing everything.
  expect(queued.length).toBe(CAP);
}

describe("a burst of webhooks against the queued-runs quota", () => {
  it("SQLite: one process queues at most the cap", async () => {
    const s = await startServer(options("sqlite"));
    try {
      const token = await setUp(s);
      const result = await burst([s.url], token);
      expectHeld(result, sqliteRows<{ eventId: string }>(s, "select event_id as eventId from runs where status = 'queued'"));
    } finally {
      await s.close();
    }
  });

  it("PostgreSQL: two replicas bursting together queue at most the cap between them", async () => {
    const a = await startServer(options("postgres"));
    const b = await startServer({ ...options("postgres"), databaseUrl: a.databaseUrl });
    const sql = postgres(a.databaseUrl!, { max: 1, onnotice: () => {} });
    try {
      const token = await setUp(a);
      const result = await burst([a.url, b.url], token);
      const queued = await sql<{ eventId: string }[]>`select event_id as "eventId" from runs where status = 'queued'`;
      expectHeld(result, [...queued]);
    } finally {
      await sql.end();
      await b.close();
      await a.close();
    }
  });
});
