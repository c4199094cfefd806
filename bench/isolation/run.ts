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
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import autocannon, { type Result } from "autocannon";
import { AgentSchema } from "../../gen/platform/v1/agent_pb.js";
import {
  CreateAgentRequestSchema,
  CreateTenantRequestSchema,
  CreateTriggerRequestSchema,
  CreateWebhookSourceRequestSchema,
} from "../../gen/platform/v1/platform_service_pb.js";
import { buildApp, type App } from "../../src/app.js";
import type { Authenticator, Principal } from "../../src/integrations/identity/index.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import { createLogger } from "../../src/log.js";
import { noopExecutor } from "../../src/runtime/executor.js";
import { createSqliteStore } from "../../src/store/sqlite/store.js";
import { positiveInt } from "../lib/env.js";
import { describeHost, runBench } from "../lib/run.js";
import { printTable } from "../lib/table.js";

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
const noisyBody = JSON.stringify({
  event_type: "attack.now",
  payload: { subject: "a".repeat(32) + "!", items: Array.from({ length: 6000 }, (_, i) => ({ i })) },
});

async function start(dir: string): Promise<{ app: App; url: string }> {
  const store = createSqliteStore({ path: join(dir, "agentplane.db"), synchronous: "FULL" });
  const fixed: Principal = { subject: "bench-admin", scopes: new Set(), claims: {} };
  const authenticator: Authenticator = { authenticate: () => Promise.resolve(fixed) };
  const app = await buildApp({
    store,
    secrets: new SecretBox(randomBytes(32)),
    authenticator,
    logger: createLogger("silent"),
    webhook: { maxBytes: 1024 * 1024, ratePerSecond: 100, burst: 200 },
    runtime: { executor: noopExecutor, concurrency: 8, leaseMs: 30_000, maxAttempts: 3, scheduler: false },
  });
  await app.server.listen({ host: "127.0.0.1", port: 0 });
  app.start();
  const address = app.server.server.address();
  if (!address || typeof address === "string") throw new Error("server has no TCP address");
  return { app, url: `http://127.0.0.1:${address.port}` };
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
  const { app, url } = await start(dir);
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
    const check = await fetch(`${url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": quietToken! },
      body: quietBody,
    });
    const answer = (await check.json()) as { matched_triggers?: number };
    if (check.status !== 202 || answer.matched_triggers !== 2) throw new Error(`preflight: ${check.status} ${JSON.stringify(answer)}`);

    console.log(`Tenant isolation: ${describeHost()}`);
    console.log(`quiet: ${QUIET_RATE} events/s on 8 connections; noisy: 16 connections as fast as it can, ${NOISY_SOURCES} sources, ${NOISY_TRIGGERS} hostile filters; ${seconds} s per phase\n`);

    await quietLoad(url, quietToken!, 2); // warm-up
    const aloneHealth = sampleHealthz(url);
    const alone = await quietLoad(url, quietToken!, seconds);
    const aloneSamples = await aloneHealth.stop();

    const floodHealth = sampleHealthz(url);
    const [beside, flood] = await Promise.all([quietLoad(url, quietToken!, seconds), noisyLoad(url, noisyTokens, seconds)]);
    const floodSamples = await floodHealth.stop();

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
      [row("alone", alone, aloneSamples), row("beside the flood", beside, floodSamples)],
    );
    console.log(`\nnoisy tenant: ${codes(flood)} (${flood.errors} errors, ${flood.timeouts} timeouts)`);
    console.log(
      `expression overruns: ${await metric(url, /^agentplane_expression_overruns_total\{/)}, ` +
        `filters skipped while suspended: ${await metric(url, /^agentplane_trigger_filter_failures_total\{reason="suspended"\}/)}`,
    );
    const p99 = beside.latency.p99;
    const refused = beside.non2xx + beside.errors + beside.timeouts;
    console.log(
      `\nquiet p99 beside the flood: ${fmt(p99)} ms (alone ${fmt(alone.latency.p99)} ms; target < ${TARGET_P99_MS} ms: ${p99 < TARGET_P99_MS ? "met" : "NOT met"}); ` +
        `refused: ${refused} (target 0: ${refused === 0 ? "met" : "NOT met"}); ` +
        `healthz max: ${fmt(max(floodSamples))} ms (target < ${TARGET_HEALTHZ_MS} ms: ${max(floodSamples) < TARGET_HEALTHZ_MS ? "met" : "NOT met"})`,
    );
    if (flood.statusCodeStats["500"]) throw new Error("the server answered 500 under the flood");
  } finally {
    await app.stop(1000);
    rmSync(dir, { recursive: true, force: true });
  }
}

runBench(main);
