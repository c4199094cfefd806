// Runs are never left in `running` by a store hiccup (issue 9, finding 6): a
// transient store failure while a worker records a run's outcome (a full
// disk, a lock) is retried until the store takes it, by the live worker,
// without a restart and without running the run a second time.
import type Database from "better-sqlite3";
import { StoreUnavailableError } from "../src/store/errors.js";
import type { RunQueue } from "../src/store/store.js";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectMust, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let admin: string;
let server: TestServer;
// While set, the queue's writes fail as SQLite does when the disk is full.
let diskFull = false;
// Outcomes (finish calls) refused meanwhile, by run.
const refusedFinish = new Set<unknown>();

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  server = await startServer({ authenticator: issuer.authenticator(60), runtime: { leaseMs: 400, concurrency: 4 } });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  // Fault injection at the store boundary: the worker, the queue SQL and the
  // API are the real ones; only these writes fail for a while.
  const queue = server.store.queue as { -readonly [K in keyof RunQueue]: RunQueue[K] };
  for (const name of ["finish", "recordSteps", "heartbeat"] as const) {
    const real = queue[name].bind(queue) as (...args: unknown[]) => Promise<unknown>;
    (queue as Record<string, unknown>)[name] = (...args: unknown[]) => {
      if (!diskFull) return real(...args);
      if (name === "finish") refusedFinish.add(args[1]);
      return Promise.reject(new StoreUnavailableError("SQLITE_FULL: database or disk is full"));
    };
  }
});
afterAll(() => server.close());

async function must(method: string, body: unknown): Promise<Json> {
  return connectMust(server, method, body, bearer(admin, "acme"));
}

it("finishes runs whose outcome could not be recorded once the store recovers, on the same attempt", async () => {
  const agent = (await must("CreateAgent", { agent: { name: "a", model: PLACEHOLDER_MODEL } })).agent as Json;
  diskFull = true;
  const ids: string[] = [];
  // Fewer runs than worker slots: a run whose outcome waits holds its slot.
  for (let i = 0; i < 3; i++) ids.push(((await must("RunAgent", { id: agent.id, input: { i } })).run as Json).id as string);
  // Until every run's outcome was refused and its lease has expired (no
  // heartbeat is written either), as the store shows it.
  const db = (server.store as unknown as { db: { $client: Database.Database } }).db.$client;
  const leases = db.prepare<string[], { status: string; lease_expire_time: number | null }>(
    `select status, lease_expire_time from runs where id in (${ids.map(() => "?").join(", ")})`,
  );
  await waitFor("every lease to expire with its outcome refused", 10_000, () => {
    const rows = leases.all(...ids);
    const now = Date.now();
    return refusedFinish.size >= ids.length && rows.length === ids.length && rows.every((r) => r.status === "running" && r.lease_expire_time! < now) ? true : undefined;
  });
  const stuck = await Promise.all(ids.map(async (id) => ((await must("GetRun", { id })).run as Json).status));
  diskFull = false;
  expect(stuck).toEqual(ids.map(() => "RUN_STATUS_RUNNING"));
  const deadline = Date.now() + 10_000;
  for (const id of ids) {
    let run: Json;
    do {
      run = (await must("GetRun", { id })).run as Json;
      if (run.status !== "RUN_STATUS_RUNNING") break;
      await new Promise((r) => setTimeout(r, 50));
    } while (Date.now() < deadline);
    // The no-op executor's one step, recorded with the outcome; attempt 1: not run again.
    expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", attempt: 1, steps: [expect.objectContaining({ tool: "noop" })] });
  }
});

it("claims again its own expired run whose outcome it gave up on (a restart is not needed)", async () => {
  // A run left `running` under this worker's own name with an expired lease,
  // which it no longer executes: as after a failed outcome in an older version.
  const agent = (await must("CreateAgent", { agent: { name: "b", model: PLACEHOLDER_MODEL } })).agent as Json;
  const owner = server.app.worker!.owner;
  server.app.worker!.wake = () => {}; // hold the worker back while the row is staged
  const id = ((await must("RunAgent", { id: agent.id, input: {} })).run as Json).id as string;
  const db = (server.store as unknown as { db: { $client: Database.Database } }).db.$client;
  db.prepare("update runs set status = 'running', attempt = 1, lease_owner = ?, lease_expire_time = ? where id = ?").run(owner, Date.now() - 1000, id);
  delete (server.app.worker as unknown as { wake?: unknown }).wake; // the prototype's wake again
  server.app.worker!.wake();
  const deadline = Date.now() + 10_000;
  let run: Json;
  do {
    run = (await must("GetRun", { id })).run as Json;
    await new Promise((r) => setTimeout(r, 50));
  } while (run.status === "RUN_STATUS_RUNNING" && Date.now() < deadline);
  expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", attempt: 2 });
});
