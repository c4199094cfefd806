// A worker stalled past its lease (a long pause, a starved machine) while a
// step's call is in flight. Another worker claims the run when the lease
// expires and executes that step again, with the same idempotency key: what
// a lease is for. The stalled worker must not go on to the run's next step
// when it resumes. It sends no further call and records nothing, because it
// confirms the lease before a call whenever its last renewal is two
// heartbeats old.
// Both workers are the real agent runtime, in two servers on one SQLite file,
// each with an injected clock. The stall is the first worker's clock jumping
// past the lease with no heartbeat in between. The MCP server is a real SDK
// server that holds the first step's calls until the test releases them.
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectMust, startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;
const META = "agentplane/idempotency-key";
// Its heartbeat (a third of it, 20 s) does not come within the test:
// only the clocks move the lease.
const LEASE_MS = 60_000;

let issuer: DevIssuer;
let admin: string;
let mcp: CustomerMcp;
const servers: TestServer[] = [];

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  mcp = await startOpenMcp();
});
afterAll(async () => {
  for (const s of servers.reverse()) await s.close();
  await mcp?.close();
});

async function serve(now: () => number, dir?: string): Promise<TestServer> {
  const server = await startServer({
    authenticator: issuer.authenticator(60),
    outboundAllow: ["127.0.0.0/8"],
    ...(dir && { dir }),
    runtime: { executor: "agents", leaseMs: LEASE_MS, idlePollMs: 600_000, now },
  });
  servers.push(server);
  return server;
}

it("a worker stalled past its lease, the run claimed elsewhere, sends no further call when it resumes", async () => {
  let stalledMs = 0;
  const first = await serve(() => Date.now() + stalledMs);
  await first.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  const must = (method: string, body: unknown) => connectMust(first, method, body, bearer(admin, "acme"));
  const skillId = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
  const steps = ["one", "two"].map((key) => ({ skillId, tool: "track", arguments: `{"key": "${key}", "ms": 0}` }));
  const agentId = ((await must("CreateAgent", { agent: { name: "two steps", skillIds: [skillId], steps } })).agent as Json).id as string;

  const release = mcp.holdTrackKey("one");
  const runId = ((await must("RunAgent", { id: agentId, input: {} })).run as Json).id as string;
  await waitFor("the first worker's call of step one", 30_000, () => (mcp.heldTrackKeys().length === 1 ? true : undefined));

  // A second worker whose clock is past the first one's lease claims the run
  // and calls step one again, with the same idempotency key.
  const second = await serve(() => Date.now() + LEASE_MS + 1_000, first.dir);
  await waitFor("the second worker's call of step one", 30_000, () => (mcp.heldTrackKeys().length === 2 ? true : undefined));
  const keys = mcp.toolCallRequests().map((r) => r.meta?.[META]);
  expect(keys).toHaveLength(2);
  expect(keys[1]).toBe(keys[0]);

  // The first worker resumes as after a stall: its clock past its lease.
  stalledMs = LEASE_MS + 1_000;
  release();

  const run = await waitFor(
    "the run to succeed",
    30_000,
    async () => {
      const r = (await must("GetRun", { id: runId })).run as Json;
      return r.status === "RUN_STATUS_SUCCEEDED" ? r : undefined;
    },
    25,
  );
  // The first worker's attempt is over (its call of step two, had it sent one, is made).
  await waitFor("the first worker to let go of the run", 30_000, () => (first.app.worker!.active === 0 ? true : undefined));

  expect(mcp.trackedCalls().map((c) => c.key).sort()).toEqual(["one", "one", "two"]);
  // Step two was called once, by the second worker, on the run's second attempt.
  const recorded = run.steps as Json[];
  const stepTwo = recorded.filter((s) => (s.arguments as Json).key === "two");
  expect(stepTwo).toHaveLength(1);
  expect(stepTwo[0]).toMatchObject({ status: "STEP_STATUS_SUCCEEDED", worker: second.app.worker!.owner });
  expect(run.attempt ?? 0).toBe(2);
});
