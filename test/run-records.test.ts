// What a run records, on both engines (issue 19 items 3 and 4): input the
// store would refuse is refused at the door with the field named; tool
// results and model replies holding such characters are recorded escaped;
// every recorded value has a cap and the run's record a total; an outcome
// the store refuses for good fails the run once instead of holding its slot;
// a skill answering 50 MB costs one bounded read. Real server, real agent
// runtime, real MCP servers, a scripted model endpoint.
import postgres from "postgres";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { toStoreError } from "../src/store/sqlite/errors.js";
import type { RunQueue } from "../src/store/store.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { startHostileMcp, type HostileMcp } from "./support/hostile-mcp.js";
import { startModelServer } from "./support/model-server.js";
import { bearer, connectCall, connectMust, sqliteRows, startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;

const LIMITS = { stepArgumentsBytes: 1024, stepResultBytes: 64 * 1024, outputBytes: 64 * 1024, runRecordBytes: 256 * 1024, errorChars: 4096 };
const UNSTORABLE = "must not contain NUL characters or unpaired UTF-16 surrogates";
// Marks the runs whose outcome the store is made to refuse.
const POISON = "poison-me";

let issuer: DevIssuer;
let admin: string;
beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
});

describe.each(["sqlite", "postgres"] as const)("on %s", (engine) => {
  let server: TestServer;
  let mcp: CustomerMcp;
  let hostile: HostileMcp;
  let sql: postgres.Sql | undefined;
  let echoSkill: string;
  let bigSkill: string;
  // Calls to the real queue's finish for poisoned runs, by run.
  const poisonedFinishes = new Map<string, number>();

  beforeAll(async () => {
    server = await startServer({
      store: engine,
      authenticator: issuer.authenticator(60),
      outboundAllow: ["127.0.0.0/8"],
      runtime: { executor: "agents", concurrency: 2, recordLimits: LIMITS },
    });
    await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
    await server.seedTenant("beta", [{ subject: issuer.clientId, role: "admin" }]);
    if (server.databaseUrl) sql = postgres(server.databaseUrl, { max: 1, onnotice: () => {} });
    // A poisoned run's outcome is one the store refuses every time: on
    // PostgreSQL a real one (a NUL past the recorder, 22P05), on SQLite the
    // error its driver gives for a value past its length limit.
    const queue = server.store.queue as { -readonly [K in keyof RunQueue]: RunQueue[K] };
    const finish = queue.finish.bind(queue);
    queue.finish = (owner, id, outcome, now) => {
      if (outcome.status !== "succeeded" || !JSON.stringify(outcome.steps).includes(POISON)) return finish(owner, id, outcome, now);
      poisonedFinishes.set(id, (poisonedFinishes.get(id) ?? 0) + 1);
      if (engine === "postgres") return finish(owner, id, { ...outcome, output: { bad: "a\u0000b" } }, now);
      return Promise.reject(toStoreError(Object.assign(new Error("string or blob too big"), { code: "SQLITE_TOOBIG" })));
    };
    mcp = await startOpenMcp();
    hostile = await startHostileMcp();
    echoSkill = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } })).skill as Json).id as string;
    bigSkill = ((await must("CreateSkill", { skill: { name: "big", mcpUrl: hostile.url } })).skill as Json).id as string;
  });
  afterAll(async () => {
    await sql?.end();
    await server.close();
    await mcp.close();
    await hostile.close();
  });

  const must = (method: string, body: unknown, tenant = "acme") => connectMust(server, method, body, bearer(admin, tenant));
  const call = (method: string, body: unknown, tenant = "acme") => connectCall(server, method, body, bearer(admin, tenant));
  const getRun = async (id: string, tenant = "acme") => (await must("GetRun", { id }, tenant)).run as Json;
  const stepsOf = (run: Json) => (run.steps ?? []) as Json[];
  const ended = (id: string, tenant = "acme", ms = 30_000) =>
    waitFor(`run ${id} to end`, ms, async () => {
      const run = await getRun(id, tenant);
      return ["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string) ? undefined : run;
    }, 20);

  // Names are unique in a tenant: each agent gets its own.
  let plans = 0;
  async function startPlan(steps: { skillId: string; tool: string; arguments: string }[], tenant = "acme"): Promise<string> {
    const skillIds = [...new Set(steps.map((s) => s.skillId))];
    const agent = (await must("CreateAgent", { agent: { name: `plan ${++plans}`, skillIds, steps } }, tenant)).agent as Json;
    return ((await must("RunAgent", { id: agent.id, input: {} }, tenant)).run as Json).id as string;
  }

  // The row as the store keeps it: steps and output as JSON values.
  async function stored(id: string): Promise<{ status: string; attempt: number; error: string; steps: Json[]; output: unknown }> {
    if (sql) {
      const [row] = await sql<{ status: string; attempt: number; error: string; steps: Json[]; output: unknown }[]>`
        select status, attempt, error, steps, output from runs where id = ${id}`;
      return row!;
    }
    const [row] = sqliteRows<{ status: string; attempt: number; error: string; steps: string; output: string | null }>(
      server,
      "select status, attempt, error, steps, output from runs where id = ?",
      id,
    );
    return { ...row!, steps: JSON.parse(row!.steps) as Json[], output: row!.output === null ? null : JSON.parse(row!.output) };
  }

  describe("input the store would refuse", () => {
    async function webhook(body: string): Promise<{ status: number; body: Json }> {
      const source = await must("CreateWebhookSource", { webhookSource: { name: `source ${Math.random()}` } });
      const res = await fetch(`${server.url}/webhooks/events`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-webhook-token": source.token as string },
        body,
      });
      return { status: res.status, body: (await res.json()) as Json };
    }

    it("a webhook payload with a NUL or an unpaired surrogate is refused with 400 naming the field, and nothing is stored", async () => {
      const nul = await webhook('{"event_type":"order.created","payload":{"order":{"note":"a\\u0000b"}}}');
      expect(nul.status).toBe(400);
      expect(nul.body.message).toBe(`payload.order.note: ${UNSTORABLE}`);
      const surrogate = await webhook('{"event_type":"order.created","payload":{"tags":["ok","\\ud800"]}}');
      expect(surrogate.status).toBe(400);
      expect(surrogate.body.message).toBe(`payload.tags[1]: ${UNSTORABLE}`);
      const key = await webhook('{"event_type":"order.created","payload":{"user":{"\\udc00name":1}}}');
      expect(key.status).toBe(400);
      expect(key.body.message).toBe(`payload.user: keys ${UNSTORABLE}`);
      // A surrogate pair is a character like any other.
      const pair = await webhook('{"event_type":"order.created","payload":{"emoji":"\\ud83d\\ude00"}}');
      expect(pair.status).toBe(202);
      const events = ((await must("ListEvents", {})).events ?? []) as Json[];
      expect(events.map((e) => e.payload)).toEqual([{ emoji: "\u{1F600}" }]);
    });

    it("API names and JSON input with them are refused with 400 naming the field", async () => {
      const agent = await call("CreateAgent", { agent: { name: "a\u0000b", skillIds: [echoSkill], steps: [{ skillId: echoSkill, tool: "echo", arguments: '{"text": "x"}' }] } });
      expect(agent.status).toBe(400);
      expect(agent.body.message).toBe(`agent.name: ${UNSTORABLE}`);
      const source = await call("CreateWebhookSource", { webhookSource: { name: "x\u0000" } });
      expect(source.status).toBe(400);
      expect(source.body.message).toBe(`webhook_source.name: ${UNSTORABLE}`);
      // A proto string field is UTF-8: the decoder refuses a lone surrogate, naming the field.
      const surrogate = await call("CreateWebhookSource", { webhookSource: { name: "x\ud800" } });
      expect(surrogate.status).toBe(400);
      expect(surrogate.body.message).toMatch(/WebhookSource\.name.*invalid UTF8/);
      const step = await call("CreateAgent", { agent: { name: "plan", skillIds: [echoSkill], steps: [{ skillId: echoSkill, tool: "echo\u0000", arguments: "{}" }] } });
      expect(step.status).toBe(400);
      expect(step.body.message).toBe(`agent.steps[0].tool: ${UNSTORABLE}`);
      const created = (await must("CreateAgent", { agent: { name: "echo", skillIds: [echoSkill], steps: [{ skillId: echoSkill, tool: "echo", arguments: '{"text": "x"}' }] } })).agent as Json;
      const run = await call("RunAgent", { id: created.id, input: { customer: { name: "\udfff" } } });
      expect(run.status).toBe(400);
      expect(run.body.message).toBe(`input.customer.name: ${UNSTORABLE}`);
      expect((await must("ListRuns", {})).runs ?? []).toEqual([]);
    });

    it("a skill server's tool list with them is not stored: the skill's refresh error names where", async () => {
      const odd = await startHostileMcp({ description: "big\u0000" });
      try {
        const skill = (await must("CreateSkill", { skill: { name: "odd", mcpUrl: odd.url } })).skill as Json;
        expect(skill.tools ?? []).toEqual([]);
        expect(skill.toolsRefreshError).toBe(`the server's tool list cannot be stored: tools[0].description: ${UNSTORABLE}`);
      } finally {
        await odd.close();
      }
    });
  });

  describe("values a run records", () => {
    // A server a test started for itself, closed after it whatever happened.
    let afterCleanup: (() => Promise<void>) | undefined;
    afterEach(async () => {
      await afterCleanup?.();
      afterCleanup = undefined;
    });

    it("a tool's arguments and result with a NUL and an unpaired surrogate are recorded escaped; the run succeeds at attempt 1", async () => {
      // JSONata's string escapes: the expression's text itself is plain.
      const id = await startPlan([{ skillId: echoSkill, tool: "echo", arguments: '{"text": "a\\u0000b\\ud800c\\\\"}' }]);
      const run = await ended(id);
      expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", attempt: 1 });
      const escaped = { $escaped: "a\\u0000b\\ud800c\\\\" };
      expect(stepsOf(run)[0]).toMatchObject({ status: "STEP_STATUS_SUCCEEDED", arguments: { text: escaped }, result: { text: escaped } });
      expect(run.output).toEqual({ text: escaped });
      // The tool got the value itself.
      expect(mcp.toolCalls().at(-1)).toEqual({ name: "echo", arguments: { text: "a\u0000b\ud800c\\" } });
      const row = await stored(id);
      expect(row).toMatchObject({ status: "succeeded", attempt: 1, output: { text: escaped } });
    });

    it("a model reply with them is recorded escaped, as the step's result and the run's output", async () => {
      const model = await startModelServer([{ content: "done\u0000\udc00" }]);
      try {
        const agent = (await must("CreateAgent", { agent: { name: "assistant", model: { baseUrl: model.baseUrl, model: "scripted-1", apiKey: "k" } } })).agent as Json;
        const id = ((await must("RunAgent", { id: agent.id, input: {} })).run as Json).id as string;
        const run = await ended(id);
        const escaped = { $escaped: "done\\u0000\\udc00" };
        expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", attempt: 1, output: escaped });
        expect(stepsOf(run)[0]).toMatchObject({ kind: "STEP_KIND_MODEL_CALL", result: { content: escaped } });
        expect((await stored(id)).output).toEqual(escaped);
      } finally {
        await model.close();
      }
    });

    it("a step result past its cap is recorded as a truncation marker, and so is the output", async () => {
      const id = await startPlan([{ skillId: bigSkill, tool: "big", arguments: '{"bytes": 200000}' }]);
      const run = await ended(id);
      expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", attempt: 1 });
      const marker = { $truncated: { bytes: 200_011, limit: LIMITS.stepResultBytes, preview: expect.stringMatching(/^\{"text":"x+$/) } };
      expect(stepsOf(run)[0]!.result).toEqual(marker);
      expect(run.output).toEqual({ $truncated: { ...marker.$truncated, limit: LIMITS.outputBytes } });
      expect(((stepsOf(run)[0]!.result as Json).$truncated as Json).preview).toHaveLength(512);
    });

    it("a later step and the run's output see a result past its cap as its marker: the run holds no more of it", async () => {
      const id = await startPlan([
        { skillId: bigSkill, tool: "big", arguments: '{"bytes": 200000}' },
        { skillId: echoSkill, tool: "echo", arguments: '{"text": $string(steps[0].result.`$truncated`.limit)}' },
      ]);
      const run = await ended(id);
      expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", attempt: 1, output: { text: String(LIMITS.stepResultBytes) } });
    });

    it("a run whose record reaches its cap fails with record_limit at attempt 1, its record within the cap", async () => {
      const steps = Array.from({ length: 40 }, () => ({ skillId: bigSkill, tool: "big", arguments: '{"bytes": 60000}' }));
      const id = await startPlan(steps);
      const run = await ended(id);
      expect(run).toMatchObject({ status: "RUN_STATUS_FAILED", attempt: 1 });
      expect(run.error).toMatch(/^record_limit: /);
      const row = await stored(id);
      const bytes = Buffer.byteLength(JSON.stringify(row.steps));
      // One step past the cap at most: the one whose record filled it.
      expect(bytes).toBeLessThanOrEqual(LIMITS.runRecordBytes + 2048);
      expect(bytes).toBeGreaterThan(LIMITS.runRecordBytes - 2048);
      expect((row.steps[0]!.result as Json).text).toHaveLength(60_000);
      expect(row.steps.at(-1)!.result).toHaveProperty("$truncated");
      expect(row.steps.length).toBeLessThan(40);
    });

    it.each([
      ["a JSON body", undefined],
      ["an SSE stream", { sse: true, gzip: false }],
      // 50 KB on the wire: the limit counts the bytes as decoded.
      ["a gzip-encoded JSON body", { sse: false, gzip: true }],
    ])("a skill answering 50 MB as %s fails the step with skill_response_too_large after one read, memory bounded", async (_, own) => {
      const server = own ? await startHostileMcp(own) : hostile;
      afterCleanup = own ? () => server.close() : undefined;
      const skillId = own ? (((await must("CreateSkill", { skill: { name: own.sse ? "big-sse" : "big-gzip", mcpUrl: server.url } })).skill as Json).id as string) : bigSkill;
      const before = server.toolCalls();
      const call = async () => {
        const id = await startPlan([{ skillId, tool: "big", arguments: '{"bytes": 50000000}' }]);
        const run = await ended(id);
        expect(run).toMatchObject({ status: "RUN_STATUS_FAILED", attempt: 1 });
        expect(run.error).toMatch(/^steps\[0\] \(big\): skill_response_too_large: /);
        expect(stepsOf(run)[0]!.callAttempts).toHaveLength(1);
      };
      // The first call warms what any call would (code, pools), not counted.
      await call();
      const rss = [process.memoryUsage().rss];
      const sampler = setInterval(() => rss.push(process.memoryUsage().rss), 10);
      try {
        for (let i = 0; i < 3; i++) await call();
      } finally {
        clearInterval(sampler);
      }
      // Not retried: the same call would answer the same.
      expect(server.toolCalls() - before).toBe(4);
      // One 50 MB answer read whole is 100 MB and more (the text, then its
      // parse); read to the 4 MiB response limit, a few of those.
      expect(Math.max(...rss) - rss[0]!).toBeLessThan(96 * 1024 * 1024);
    });
  });

  it("an outcome the store refuses for good fails the run once with record_rejected, never claimed again; other tenants' runs go on", async () => {
    const poisoned = await Promise.all(
      Array.from({ length: 4 }, () => startPlan([{ skillId: echoSkill, tool: "echo", arguments: `{"text": "${POISON}"}` }])),
    );
    // Beta's run needs a free slot of the two.
    const betaSkill = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } }, "beta")).skill as Json).id as string;
    const beta = await startPlan([{ skillId: betaSkill, tool: "echo", arguments: '{"text": "hello"}' }], "beta");
    expect(await ended(beta, "beta", 15_000)).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", attempt: 1 });
    for (const id of poisoned) {
      const run = await ended(id);
      expect(run).toMatchObject({ status: "RUN_STATUS_FAILED", attempt: 1 });
      expect(run.error).toMatch(/^record_rejected: the store refused the run's record/);
      // The steps stay, without the values they recorded.
      expect(stepsOf(run)).toEqual([expect.objectContaining({ tool: "echo", status: "STEP_STATUS_SUCCEEDED" })]);
      expect(stepsOf(run)[0]).not.toHaveProperty("result");
      // The full outcome once, then the bare one, which the store took.
      expect(poisonedFinishes.get(id)).toBe(1);
      expect(await stored(id)).toMatchObject({ status: "failed", attempt: 1 });
    }
  });
});
