// On PostgreSQL a claim hands out with each run what starting it reads (its
// event, its agent's update time: store.ts ClaimContext), so executing a run
// costs no read of its event and no read of an agent already held. An agent
// edited after runs were executed is executed as edited by the next run,
// at once, with no change signal waited for. The real store and claim, the
// real executor; the store's reads are counted on their way through.
import pino from "pino";
import { newId } from "../src/lib/ids.js";
import type { SecretBox } from "../src/lib/secret-box.js";
import type { ExpressionSandbox } from "../src/integrations/expressions/sandbox.js";
import type { ChatModel } from "../src/integrations/model/chat-model.js";
import { createAgentExecutor } from "../src/runtime/agent-executor.js";
import type { ExecutionContext } from "../src/runtime/executor.js";
import { createPostgresStore } from "../src/store/postgres/store.js";
import type { Store } from "../src/store/store.js";
import { UNRECORDED_TRIES } from "../src/lib/call-tries.js";
import postgres from "postgres";
import { createTestDatabase, type TestDatabase } from "./support/postgres.js";

const TENANT = "ten_ctx";
const AGENT = "agt_ctx";
const SKILL = "skl_ctx";
const spec = (tool: string) => JSON.stringify({ skillIds: [SKILL], allowedTools: {}, steps: [{ skillId: SKILL, tool, arguments: "" }] });

describe("the claim's context on PostgreSQL", () => {
  let database: TestDatabase;
  let store: Store;
  let sql: postgres.Sql;
  beforeAll(async () => {
    database = await createTestDatabase();
    store = await createPostgresStore({ url: database.url, poolSize: 2 });
    sql = postgres(database.url, { max: 1, onnotice: () => {} });
    const t = Date.now();
    await sql`insert into tenants (id, slug, create_time, update_time) values (${TENANT}, ${TENANT}, ${t}, ${t})`;
    await sql`insert into skills (id, tenant_id, name, mcp_url, auth, tools, create_time, update_time)
      values (${SKILL}, ${TENANT}, 'tools', 'https://mcp.example/mcp', '{"mode":"none"}', '[]', ${t}, ${t})`;
    await sql`insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, enabled, create_time, update_time)
      values (${AGENT}, ${TENANT}, 'a', ${spec("first")}::text::jsonb, 16, 120000, true, ${t}, ${t})`;
  });
  afterAll(async () => {
    await sql?.end();
    await store?.close();
    await database?.drop();
  });

  it("executes runs without reading their event or a held agent again, and an edited agent as edited at once", async () => {
    const reads = { agents: 0, events: 0 };
    const counted = {
      ...store,
      agents: { ...store.agents, get: (tenantId: string, id: string) => (reads.agents++, store.agents.get(tenantId, id)) },
      events: { ...store.events, get: (tenantId: string, id: string) => (reads.events++, store.events.get(tenantId, id)) },
    } as Store;
    const called: [string, unknown][] = [];
    const executor = createAgentExecutor({
      store: counted,
      secrets: {} as SecretBox,
      tools: { call: async (_skill, tool, args) => (called.push([tool, args]), { result: tool, error: "", ...UNRECORDED_TRIES }) },
      models: {} as ChatModel,
      log: pino({ level: "silent" }),
      sandbox: {} as ExpressionSandbox,
      stepBudgetMs: 1000,
    });
    const ctx: ExecutionContext = {
      signal: new AbortController().signal,
      startStep: () => ({ end: (outcome: { result?: unknown }) => outcome.result, ...UNRECORDED_TRIES }),
      resume: () => undefined,
    };
    const queueAndRun = async (n: number, eventId: string | null = null) => {
      const t = Date.now();
      const rows = Array.from({ length: n }, () => ({ id: newId("run"), tenantId: TENANT, agentId: AGENT, eventId, input: null, status: "queued" as const, steps: [], createTime: t, updateTime: t }));
      expect(await store.queue.insertMany(rows)).toBe(true);
      const claimed = await store.queue.claim("w1", n, 60_000, 3, Date.now(), []);
      expect(claimed).toHaveLength(n);
      return Promise.all(claimed.map((run) => executor.execute(run, ctx)));
    };

    expect(await queueAndRun(3)).toEqual(Array(3).fill({ status: "succeeded", output: "first" }));
    expect(reads).toEqual({ agents: 1, events: 0 });

    // Edited past the store, as another replica's edit lands: a new update time.
    await sql`update agents set spec = ${spec("second")}::text::jsonb, update_time = update_time + 1 where id = ${AGENT}`;
    expect(await queueAndRun(1)).toEqual([{ status: "succeeded", output: "second" }]);
    expect(reads).toEqual({ agents: 2, events: 0 });

    // A run an event queued: the event comes with the claim.
    const t = Date.now();
    const source = newId("src");
    const event = newId("evt");
    await sql`insert into webhook_sources (id, tenant_id, name, enabled, kind, create_time, update_time) values (${source}, ${TENANT}, 'orders', true, 'envelope', ${t}, ${t})`;
    await sql`insert into events (id, tenant_id, source_id, event_type, payload, receive_time, matched_trigger_ids, create_time, update_time)
      values (${event}, ${TENANT}, ${source}, 'order.created', '{"order": 7}'::jsonb, ${t}, '[]', ${t}, ${t})`;
    expect(await queueAndRun(1, event)).toEqual([{ status: "succeeded", output: "second" }]);
    expect(reads).toEqual({ agents: 2, events: 0 });
    expect(called.map(([tool]) => tool)).toEqual(["first", "first", "first", "second", "second"]);

    // The agent gone: the run fails saying so.
    await sql`delete from agents where id = ${AGENT}`;
    expect(await queueAndRun(1)).toEqual([{ status: "failed", error: `agent "${AGENT}" no longer exists` }]);
  });
});
