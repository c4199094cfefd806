// SQLite ingest commits on its writer thread: while a commit waits (for the
// write lock here; for fsync in the ordinary case) the HTTP thread keeps
// answering, and the webhook is answered 202 once its event is committed.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { newId } from "../src/lib/ids.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, sqliteRows, startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

let issuer: DevIssuer;
let server: TestServer;
let token: string;

beforeAll(async () => {
  issuer = await devIssuer();
  server = await startServer({ authenticator: issuer.authenticator(60) });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  const res = await connectCall(server, "CreateWebhookSource", { webhookSource: { name: "orders" } }, bearer(await devToken(issuer), "acme"));
  token = res.body.token as string;
});

afterAll(async () => {
  await server?.close();
});

// Another process holding the database's write lock until told to commit.
async function holdWriteLock(path: string): Promise<{ child: ChildProcess; release(): Promise<void> }> {
  const program = `
    const Database = require(${JSON.stringify(createRequire(import.meta.url).resolve("better-sqlite3"))});
    const db = new Database(${JSON.stringify(path)});
    db.exec("begin immediate");
    console.log("locked");
    process.stdin.once("data", () => { db.exec("commit"); db.close(); process.exit(0); });`;
  const child = spawn(process.execPath, ["-e", program], { stdio: ["pipe", "pipe", "inherit"] });
  const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
  if (line !== "locked") throw new Error(`the lock holder said ${line}`);
  return {
    child,
    release: async () => {
      child.stdin!.write("go\n");
      await once(child, "exit");
    },
  };
}

test("a commit waiting for the write lock holds neither the HTTP thread nor the answer's truth", async () => {
  const lock = await holdWriteLock(join(server.dir, "agentplane.db"));
  let answered: number | undefined;
  const webhook = fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token, "idempotency-key": "held-1" },
    body: JSON.stringify({ event_type: "order.created", payload: { total: 250 } }),
  }).then(async (res) => {
    answered = res.status;
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  });
  try {
    // The event reached its commit (the writer waits on the lock) ...
    for (let i = 0; i < 20 && answered === undefined; i++) {
      const health = await fetch(`${server.url}/healthz`);
      expect(health.status).toBe(200);
    }
    // ... and is not answered while the lock is held: nothing is stored yet.
    expect(answered).toBeUndefined();
  } finally {
    await lock.release();
  }
  const { status, body } = await webhook;
  expect(status).toBe(202);
  expect(sqliteRows(server, "select id, event_type from events where id = ?", body.event_id)).toEqual([
    { id: body.event_id, event_type: "order.created" },
  ]);
});

// The signals' poll sees every other connection's commit, the writer
// thread's included, possibly before this thread has handled the writer's
// answer: a worker woken by it could start a run before this process said
// (and logged) that it was queued.
test("the poll for other connections' commits signals this process's own commit after its answer", async () => {
  const [source] = sqliteRows<{ id: string; tenant_id: string }>(server, "select id, tenant_id from webhook_sources limit 1");
  const order: string[] = [];
  const off = server.store.signals.onRunsQueued(() => order.push("signalled"));
  try {
    const t = Date.now();
    const event = { id: newId("evt"), tenantId: source!.tenant_id, sourceId: source!.id, eventType: "order.created", payload: {} };
    const ingested = server.store.webhooks
      .ingest({ event: { ...event, receiveTime: t, idempotencyKey: null, matchedTriggerIds: [], createTime: t, updateTime: t }, runs: [] }, 86_400_000)
      .then(() => order.push("answered"));
    // The batch goes to the writer at the next turn; this thread is then
    // held while the writer commits, so that the poll (every 100 ms) and the
    // writer's answer are both due when it is free again.
    await new Promise((resolve) => setImmediate(resolve));
    for (const until = Date.now() + 250; Date.now() < until; );
    await ingested;
    await waitFor("the poll's signal", 2_000, () => (order.includes("signalled") ? true : undefined), 20);
    expect(order).toEqual(["answered", "signalled"]);
  } finally {
    off();
  }
});
