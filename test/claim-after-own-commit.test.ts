// A run that this process's SQLite writer thread committed is claimable as
// soon as the commit lands, but this process says it was queued (the "run
// queued" line, the ingest's answer) only when it handles the writer's
// reply. A claim made here in between started the run first, and the log
// read "run started" before "run queued" (test/logs.test.ts failed so on a
// loaded machine). The claim is taken only once the writes in flight when it
// was asked for are answered.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { newId } from "../src/lib/ids.js";
import { createSqliteStore } from "../src/store/sqlite/store.js";
import type { Store } from "../src/store/store.js";

let dir: string;
let path: string;
let store: Store;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "agentplane-claim-order-"));
  path = join(dir, "agentplane.db");
  store = createSqliteStore({ path });
  const t = Date.now();
  const seed = new Database(path);
  seed.exec(`
    insert into tenants (id, slug, create_time, update_time) values ('ten-1', 'acme', ${t}, ${t});
    insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, enabled, create_time, update_time)
      values ('agt-1', 'ten-1', 'a', '{"skillIds":[],"allowedTools":{},"steps":[]}', 16, 120000, 1, ${t}, ${t});
    insert into webhook_sources (id, tenant_id, name, enabled, kind, create_time, update_time)
      values ('src-1', 'ten-1', 'shop', 1, 'envelope', ${t}, ${t});`);
  seed.close();
});

afterAll(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("a claim does not take a run this process committed before it has handled the commit's answer", async () => {
  const t = Date.now();
  const eventId = newId("evt");
  const runId = newId("run");
  const order: string[] = [];
  const ingested = store.webhooks
    .ingest(
      {
        event: { id: eventId, tenantId: "ten-1", sourceId: "src-1", eventType: "order.created", payload: {}, receiveTime: t, idempotencyKey: null, matchedTriggerIds: [], createTime: t, updateTime: t },
        runs: [{ id: runId, tenantId: "ten-1", agentId: "agt-1", eventId, input: null, status: "queued", steps: [], createTime: t, updateTime: t }],
        maxQueuedRuns: 1_000,
      },
      60_000,
    )
    .then(() => order.push("ingest answered"));
  // Let group commit hand the batch to the writer thread, then hold this
  // thread until the run is committed: the writer's answer waits meanwhile.
  await new Promise((resolve) => setImmediate(resolve));
  const peek = new Database(path, { readonly: true });
  const committed = peek.prepare("select 1 from runs where id = ?");
  const deadline = Date.now() + 60_000;
  while (!committed.get(runId)) if (Date.now() > deadline) throw new Error("the writer thread never committed the run");
  peek.close();
  const claimed = store.queue.claim("worker-1", 1, 30_000, 3, Date.now(), []).then((runs) => order.push(`claimed ${runs.map((r) => r.id).join(",")}`));
  await Promise.all([ingested, claimed]);
  expect(order).toEqual(["ingest answered", `claimed ${runId}`]);
});
