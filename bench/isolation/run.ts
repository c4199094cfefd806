// Tenant isolation under a hostile neighbour (SPEC §9): while tenant "noisy"
// posts events that trip the worst trigger filters it can write, tenant
// "quiet" sends ordinary events at a steady rate. The same run measures
// quiet's webhook latency alone, then beside the flood, and /healthz
// throughout. Target: quiet's p99 under 100 ms with nothing refused, /healthz
// under one second.
//
// One agentplane server (buildApp, SQLite with synchronous=FULL, workers
// executing runs with the no-op executor, default rate limits and expression
// budgets). Quiet: 1 source, 10 webhook triggers of which 2 match its events:
// one with a bounded filter (run inline) and one with a regular expression
// (run in the sandbox processes, so it queues beside noisy's filters).
// Noisy: 10 sources and 60 triggers whose filters loop forever, build huge
// ranges, call a quadratic builtin, allocate without end, recurse, and
// backtrack, on a ~60 KiB payload. Every event carries a distinct
// Idempotency-Key. It reports; it fails only on a server error.
//
// A third phase, amplification (issue 19 item 2): tenant "amp" sends 55 KB
// events whose expressions would build hundreds of millions of characters
// in one builtin call (`$length($join(payload.w, payload.s))`), which ended
// the whole process before the size limits: through trigger filters,
// through a source mapping, and as plan step arguments of the runs its
// events start (evaluated by the runtime in this same process), one of them
// a 5.4 KB constant. The process must live through it (this run ends),
// quiet's p99 stay under 100 ms and /healthz under one second.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import autocannon, { type Result } from "autocannon";
import { AgentSchema } from "../../gen/platform/v1/agent_pb.js";
import {
  CreateAgentRequestSchema,
  CreateSkillRequestSchema,
  CreateTenantRequestSchema,
  CreateTriggerRequestSchema,
  CreateWebhookSourceRequestSchema,
} from "../../gen/platform/v1/platform_service_pb.js";
import { buildApp, type App } from "../../src/app.js";
import { ExpressionSandbox } from "../../src/integrations/expressions/sandbox.js";
import type { ChatModel } from "../../src/integrations/model/chat-model.js";
import { createAgentExecutor } from "../../src/runtime/agent-executor.js";
import type { Executor } from "../../src/runtime/executor.js";
import type { ToolCaller } from "../../src/runtime/tool-calls.js";
import type { Store } from "../../src/store/store.js";
import type { Authenticator, Principal } from "../../src/integrations/identity/index.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import { createLogger } from "../../src/log.js";
import { noopExecutor } from "../../src/runtime/executor.js";
import { createSqliteStore } from "../../src/store/sqlite/store.js";
import { positiveInt } from "../lib/env.js";
import { describeHost, runBench } from "../lib/run.js";
import { printTable } from "../lib/table.js";
import { AMPLIFIED, AMPLIFYING_FILTER, CONSTANT, joinsOfJoins } from "../lib/amplifying.js";

const QUIET_RATE = 80; // events/s, under the default per-source limit of 100/s
const NOISY_SOURCES = 10;
const NOISY_TRIGGERS = 60;
const TARGET_P99_MS = 100;
const TARGET_HEALTHZ_MS = 1000;

const HOSTILE_FILTERS = [
  "( $f := function($x){ $f($x + 1) }; $f(0) )",
  "$count([1..9000000].($*2)) > 0",
  "$count($distinct(payload.items)) > 1",
  "$length($pad('', 300000000)) > 0",
  "( $f := function($x){ 1 + $f($x + 1) }; $f(0) )",
  "$contains(payload.subject, /^(a+)+$/)",
];

const quietBody = JSON.stringify({
  event_type: "order.created",
  payload: { order_id: "ord_[<id>]", total: 168.87, currency: "EUR", customer: { email: "jane.doe@example.com", tier: "gold" } },
});
// Amplifying expressions (see bench/lib/amplifying.ts): 11,999 × 19,000
// characters from a 55 KB payload, or 399³ × 3 (a 3.6 KB filter; filters
// are at most 4,096 characters) and 599³ × 2 (5.4 KB of step arguments)
// from nothing.
const AMPLIFYING_FILTERS = [
  AMPLIFYING_FILTER,
  "$length($join(payload.w.$$.payload.s)) > 0",
  "$length($string($join(payload.w, payload.s))) > 0",
  `${joinsOfJoins(400, "yyy")} > 0`,
];
const AMPLIFYING_MAPPING = '{"event_type": "amp.mapped", "payload": {"n": $length($join(body.payload.w, body.payload.s))}}';
const AMPLIFYING_STEPS = ['{"text": $string($length($join(event.payload.w, event.payload.s)))}', `{"text": $string(${CONSTANT})}`];
const ampBody = JSON.stringify({ event_type: "amp.attack", payload: AMPLIFIED });

const noisyBody = JSON.stringify({
  event_type: "attack.now",
  payload: { subject: "a".repeat(32) + "!", items: Array.from({ length: 6000 }, (_, i) => ({ i })) },
});

// Runs of agents with plan steps execute as in production (their arguments
// are what the amplification phase attacks; the tool is never reached);
// every other run is the no-op executor's.
function benchExecutor(store: Store, secrets: SecretBox): { executor: Executor; sandbox: ExpressionSandbox } {
  const sandbox = new ExpressionSandbox();
  const tools: ToolCaller = { call: () => Promise.reject(new Error("the bench's tools are never called")) };
  const models: ChatModel = { complete: () => Promise.reject(new Error("the bench calls no model")) };
  const agents = createAgentExecutor({ store, secrets, tools, models, log: createLogger("silent"), sandbox, stepBudgetMs: 1000 });
  const executor: Executor = {
    async execute(run, ctx) {
      const agent = await store.agents.get(run.tenantId, run.agentId);
      return agent?.spec.steps.length ? agents.execute(run, ctx) : noopExecutor.execute(run, ctx);
    },
  };
  return { executor, sandbox };
}

async function start(dir: string): Promise<{ app: App; url: string; sandbox: ExpressionSandbox }> {
  const store = createSqliteStore({ path: join(dir, "agentplane.db"), synchronous: "FULL" });
  const secrets = new SecretBox(randomBytes(32));
  const { executor, sandbox } = benchExecutor(store, secrets);
  const fixed: Principal = { subject: "bench-admin", scopes: new Set(), claims: {} };
  const authenticator: Authenticator = { authenticate: () => Promise.resolve(fixed) };
  const app = await buildApp({
    store,
    secrets,
    authenticator,
    logger: createLogger("silent"),
    webhook: { maxBytes: 1024 * 1024, ratePerSecond: 100, burst: 200 },
    runtime: { executor, concurrency: 8, leaseMs: 30_000, maxAttempts: 3, scheduler: false },
  });
  await app.server.listen({ host: "127.0.0.1", port: 0 });
  app.start();
  const address = app.server.server.address();
  if (!address || typeof address === "string") throw new Error("server has no TCP address");
  return { app, url: `http://127.0.0.1:${address.port}`, sandbox };
}

// A tenant with `sources` webhook sources, one agent, and webhook triggers
// from `triggers` ([pattern, filter]); returns the sources' tokens.
async function seed(app: App, slug: string, sources: number, triggers: [string, string][]): Promise<string[]> {
  const op = app.platform;
  await op.invokeAsOperator("createTenant", create(CreateTenantRequestSchema, { tenant: { slug, displayName: slug } }));
  // The no-op executor never calls the model; an agent needs one (or steps) to be saved.
  const { agent } = await op.invokeAsOperator("createAgent", create(CreateAgentRequestSchema, { agent: create(AgentSchema, { name: "a", model: { baseUrl: "http://192.0.2.1/v1", model: "placeholder" } }) }), slug);
  const tokens: string[] = [];
  for (let i = 0; i < sources; i++) {
    const created = await op.invokeAsOperator("createWebhookSource", create(CreateWebhookSourceRequestSchema, { webhookSource: { name: `s${i}` } }), slug);
    tokens.push(created.token!);
  }
  for (const [eventTypePattern, filter] of triggers)
    await op.invokeAsOperator(
      "createTrigger",
      create(CreateTriggerRequestSchema, { trigger: { agentId: agent!.id, kind: { case: "webhook", value: { eventTypePattern, filter } } } }),
      slug,
    );
  return tokens;
}

// Tenant "amp": sources for its filters and runs, sources with an
// amplifying mapping, triggers with amplifying filters, and triggers that
// start agents with amplifying plan steps. Returns its sources' tokens.
async function seedAmplifying(app: App): Promise<{ plain: string[]; mapped: string[] }> {
  const op = app.platform;
  const slug = "amp";
  await op.invokeAsOperator("createTenant", create(CreateTenantRequestSchema, { tenant: { slug, displayName: slug } }));
  const source = async (name: string, mapping?: string) =>
    (await op.invokeAsOperator("createWebhookSource", create(CreateWebhookSourceRequestSchema, { webhookSource: { name, mapping } }), slug)).token!;
  const plain = [await source("p0"), await source("p1")];
  const mapped = [await source("m0", AMPLIFYING_MAPPING), await source("m1", AMPLIFYING_MAPPING)];
  const { skill } = await op.invokeAsOperator("createSkill", create(CreateSkillRequestSchema, { skill: { name: "tools", mcpUrl: "https://tools.example.com/mcp" } }), slug);
  const trigger = (agentId: string | undefined, filter = "") =>
    op.invokeAsOperator(
      "createTrigger",
      create(CreateTriggerRequestSchema, { trigger: { agentId, kind: { case: "webhook", value: { eventTypePattern: "amp.*", filter } } } }),
      slug,
    );
  const { agent: modelAgent } = await op.invokeAsOperator("createAgent", create(CreateAgentRequestSchema, { agent: create(AgentSchema, { name: "m", model: { baseUrl: "http://192.0.2.1/v1", model: "placeholder" } }) }), slug);
  for (const filter of AMPLIFYING_FILTERS) await trigger(modelAgent!.id, filter);
  for (const [i, args] of AMPLIFYING_STEPS.entries()) {
    const skillId = skill!.id!;
    const steps = [{ skillId, tool: "echo", arguments: args }];
    const { agent } = await op.invokeAsOperator("createAgent", create(CreateAgentRequestSchema, { agent: create(AgentSchema, { name: `s${i}`, skillIds: [skillId], steps }) }), slug);
    await trigger(agent!.id);
  }
  return { plain, mapped };
}

// /healthz every 50 ms from the server's own event loop, so a blocked loop
// shows as a slow answer.
function sampleHealthz(url: string): { stop(): Promise<number[]> } {
  const samples: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      const res = await fetch(`${url}/healthz`);
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`/healthz answered ${res.status}`);
      samples.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return samples;
    },
  };
}

const quietLoad = (url: string, token: string, seconds: number) =>
  autocannon({
    url: `${url}/webhooks/events`,
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token, "idempotency-key": "quiet-[<id>]" },
    body: quietBody,
    idReplacement: true,
    connections: 8,
    overallRate: QUIET_RATE,
    duration: seconds,
    workers: 1,
  });

const noisyLoad = (url: string, tokens: string[], seconds: number) =>
  autocannon({
    url: `${url}/webhooks/events`,
    method: "POST",
    body: noisyBody,
    idReplacement: true,
    requests: tokens.map((token) => ({
      method: "POST" as const,
      headers: { "content-type": "application/json", "x-webhook-token": token, "idempotency-key": "noisy-[<id>]" },
    })),
    connections: 16,
    duration: seconds,
    workers: 1,
  });

// Tenant amp's flood: 55 KB events to its plain sources (filters and runs)
// and to its mapped ones (the mapping), as fast as 8 connections allow.
const ampLoad = (url: string, sources: { plain: string[]; mapped: string[] }, seconds: number) =>
  autocannon({
    url: `${url}/webhooks/events`,
    method: "POST",
    body: ampBody,
    idReplacement: true,
    requests: [...sources.plain, ...sources.mapped].map((token) => ({
      method: "POST" as const,
      headers: { "content-type": "application/json", "x-webhook-token": token, "idempotency-key": "amp-[<id>]" },
    })),
    connections: 8,
    duration: seconds,
    workers: 1,
  });

const codes = (r: Result) =>
  Object.entries(r.statusCodeStats)
    .map(([code, { count }]) => `${code}×${count}`)
    .join(" ") || "none";
const max = (xs: number[]) => xs.reduce((a, b) => Math.max(a, b), 0);
const fmt = (ms: number) => ms.toFixed(1);

async function metric(url: string, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) if (pattern.test(line)) total += Number(line.split(" ").pop());
  return total;
}

async function main(): Promise<void> {
  const seconds = positiveInt("BENCH_DURATION", 10);
  const dir = mkdtempSync(join(tmpdir(), "agentplane-bench-"));
  const { app, url, sandbox } = await start(dir);
  try {
    const quietTriggers: [string, string][] = [
      ...Array.from({ length: 8 }, (_, i): [string, string] => [`other.type.${i}`, ""]),
      ["order.*", "payload.total > 100 and payload.currency = 'EUR'"],
      ["order.*", "$contains(payload.customer.email, /@example\\.com$/)"],
    ];
    const [quietToken] = await seed(app, "quiet", 1, quietTriggers);
    const noisyTokens = await seed(
      app,
      "noisy",
      NOISY_SOURCES,
      Array.from({ length: NOISY_TRIGGERS }, (_, i): [string, string] => ["attack.*", HOSTILE_FILTERS[i % HOSTILE_FILTERS.length]!]),
    );
    const ampSources = await seedAmplifying(app);
    // Both of quiet's filters match once the sandbox processes have started
    // (the regular expression runs there, under the 50 ms filter budget, at
    // nice 19: on a machine loaded by other work it may not finish in time,
    // and after three misses it is suspended for a minute, as designed).
    await new Promise((r) => setTimeout(r, 3000));
    const check = await fetch(`${url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": quietToken! },
      body: quietBody,
    });
    const answer = (await check.json()) as { matched_triggers?: number };
    if (check.status !== 202 || !answer.matched_triggers) throw new Error(`preflight: ${check.status} ${JSON.stringify(answer)}`);
    if (answer.matched_triggers !== 2) console.log("preflight: quiet's sandboxed filter missed its budget (the machine is busy); the run goes on\n");

    console.log(`Tenant isolation: ${describeHost()}; load average ${loadavg().map((l) => l.toFixed(1)).join(" ")} at the start`);
    console.log(`quiet: ${QUIET_RATE} events/s on 8 connections; noisy: 16 connections as fast as it can, ${NOISY_SOURCES} sources, ${NOISY_TRIGGERS} hostile filters; amp: 8 connections, ${AMPLIFYING_FILTERS.length} amplifying filters, 2 mapped sources, ${AMPLIFYING_STEPS.length} amplifying plans; ${seconds} s per phase\n`);

    await quietLoad(url, quietToken!, 2); // warm-up
    const aloneHealth = sampleHealthz(url);
    const alone = await quietLoad(url, quietToken!, seconds);
    const aloneSamples = await aloneHealth.stop();

    const floodHealth = sampleHealthz(url);
    const [beside, flood] = await Promise.all([quietLoad(url, quietToken!, seconds), noisyLoad(url, noisyTokens, seconds)]);
    const floodSamples = await floodHealth.stop();

    const rssBefore = process.memoryUsage().rss;
    const ampHealth = sampleHealthz(url);
    const [besideAmp, amp] = await Promise.all([quietLoad(url, quietToken!, seconds), ampLoad(url, ampSources, seconds)]);
    const ampSamples = await ampHealth.stop();
    const rssAfter = process.memoryUsage().rss;

    const row = (phase: string, r: Result, health: number[]) => [
      phase,
      String(r["2xx"]),
      String(r.non2xx + r.errors + r.timeouts),
      fmt(r.latency.p50),
      fmt(r.latency.p99),
      fmt(r.latency.max),
      fmt(max(health)),
    ];
    printTable(
      ["quiet tenant", "2xx", "refused/failed", "p50 (ms)", "p99 (ms)", "max (ms)", "healthz max (ms)"],
      [row("alone", alone, aloneSamples), row("beside the flood", beside, floodSamples), row("beside amplification", besideAmp, ampSamples)],
    );
    console.log(`\nnoisy tenant: ${codes(flood)} (${flood.errors} errors, ${flood.timeouts} timeouts)`);
    console.log(
      `expression overruns: ${await metric(url, /^agentplane_expression_overruns_total\{/)}, ` +
        `filters skipped while suspended: ${await metric(url, /^agentplane_trigger_filter_failures_total\{reason="suspended"\}/)}`,
    );
    console.log(
      `amp tenant: ${codes(amp)} (${amp.errors} errors, ${amp.timeouts} timeouts); ` +
        `size-limited expressions: ${await metric(url, /^agentplane_expression_overruns_total\{.*reason="(limit|memory)"/)}; ` +
        `runs failed expression_limit: ${await metric(url, /^agentplane_runs_finished_total\{.*error_kind="expression_limit"/)}, ` +
        `succeeded: ${await metric(url, /^agentplane_runs_finished_total\{.*status="succeeded"/)}; ` +
        `process RSS ${(rssBefore / 2 ** 20).toFixed(0)} → ${(rssAfter / 2 ** 20).toFixed(0)} MB`,
    );
    const p99 = beside.latency.p99;
    const refused = beside.non2xx + beside.errors + beside.timeouts;
    console.log(
      `\nquiet p99 beside the flood: ${fmt(p99)} ms (alone ${fmt(alone.latency.p99)} ms; target < ${TARGET_P99_MS} ms: ${p99 < TARGET_P99_MS ? "met" : "NOT met"}); ` +
        `refused: ${refused} (target 0: ${refused === 0 ? "met" : "NOT met"}); ` +
        `healthz max: ${fmt(max(floodSamples))} ms (target < ${TARGET_HEALTHZ_MS} ms: ${max(floodSamples) < TARGET_HEALTHZ_MS ? "met" : "NOT met"})`,
    );
    const ampP99 = besideAmp.latency.p99;
    const ampRefused = besideAmp.non2xx + besideAmp.errors + besideAmp.timeouts;
    console.log(
      `quiet p99 beside amplification: ${fmt(ampP99)} ms (target < ${TARGET_P99_MS} ms: ${ampP99 < TARGET_P99_MS ? "met" : "NOT met"}); ` +
        `refused: ${ampRefused} (target 0: ${ampRefused === 0 ? "met" : "NOT met"}); ` +
        `healthz max: ${fmt(max(ampSamples))} ms (target < ${TARGET_HEALTHZ_MS} ms: ${max(ampSamples) < TARGET_HEALTHZ_MS ? "met" : "NOT met"}); the process is alive`,
    );
    if (flood.statusCodeStats["500"] || amp.statusCodeStats["500"]) throw new Error("the server answered 500 under the flood");
  } finally {
    await app.stop(1000);
    await sandbox.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

runBench(main);
