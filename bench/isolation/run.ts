// Tenant isolation under a hostile neighbour (SPEC §9): while tenant "noisy"
// posts events that trip the worst trigger filters it can write, tenant
// "quiet" sends ordinary events at a steady rate. The same run measures
// quiet's webhook latency alone, then beside the flood, and /healthz
// throughout. Target: quiet's p99 under 100 ms with nothing refused, /healthz
// under one second.
//
// The built `agentplane serve` in a process of its own, as an operator runs
// it (SQLite, runs in its worker thread, its default rate limits, quotas and
// expression budgets); the bench process holds the generators and the MCP
// server the runs call. Quiet: 1 source, 10 webhook triggers of which 2 match
// its events: one with a bounded filter (run inline) and one with a regular
// expression (run in the sandbox processes, so it queues beside noisy's
// filters); its runs call a tool. Quiet's load is open loop (each event
// leaves on schedule, its latency counted from then). Noisy: 10 sources and
// 60 triggers whose filters loop forever, build huge ranges, call a
// quadratic builtin, allocate without end, recurse, and backtrack, on a
// ~60 KiB payload. Every event carries a distinct Idempotency-Key. It
// reports; it fails only on a server error or if the service exits.
//
// A third phase, amplification (issue 19 item 2): tenant "amp" sends 55 KB
// events whose expressions would build hundreds of millions of characters
// in one builtin call (`$length($join(payload.w, payload.s))`), which ended
// the whole process before the size limits: through trigger filters,
// through a source mapping, and as plan step arguments of the runs its
// events start, one of them a 5.4 KB constant. The service must live through
// it, quiet's p99 stay under 100 ms and /healthz under one second.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import autocannon, { type Result } from "autocannon";
import { positiveInt } from "../lib/env.js";
import { latencyPercentile, pacedLoad, type PacedWindow } from "../lib/paced.js";
import { describeHost, removeScratchDir, runBench, scratchDir } from "../lib/run.js";
import { CLI, emptyPlan, freePort, Service, startJwks, SUBJECT } from "../lib/serve.js";
import { printTable } from "../lib/table.js";
import { startTrivialMcp } from "../lib/trivial-mcp.js";
import { AMPLIFIED, AMPLIFYING_FILTER, CONSTANT, joinsOfJoins } from "../lib/amplifying.js";

const exec = promisify(execFile);
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

const quietBody = (n: number) =>
  JSON.stringify({
    event_type: "order.created",
    payload: { order_id: `ord_${n}`, total: 168.87, currency: "EUR", customer: { email: "jane.doe@example.com", tier: "gold" } },
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

type Json = Record<string, unknown>;

// The service, its tenants (each administered by the bench's subject) and
// the MCP server its runs call.
async function start(dir: string) {
  const jwks = await startJwks();
  const mcp = await startTrivialMcp();
  for (const slug of ["quiet", "noisy", "amp"])
    await exec(process.execPath, [CLI, "tenant", "create", slug, "--admin", SUBJECT], { env: { PATH: process.env.PATH ?? "", AGENTPLANE_DATA_DIR: dir } });
  // The product's defaults where lib/serve.ts lifts them for throughput benches.
  const service = new Service(dir, await freePort(), jwks.url, {
    AGENTPLANE_WEBHOOK_RATE_PER_SECOND: "100",
    AGENTPLANE_WEBHOOK_BURST: "200",
    AGENTPLANE_QUOTA_QUEUED_RUNS: "10000",
  }, undefined);
  await service.ready();
  const call = <T = Json>(tenant: string, method: string, body: unknown) => service.call<T>(jwks.token, method, body, tenant);
  const close = async () => {
    await service.stop();
    await mcp.close();
    jwks.close();
  };
  return { service, mcp, call, close };
}

type Call = Awaited<ReturnType<typeof start>>["call"];

// An agent of `tenant` whose plan is one call of the bench's tool, with
// `args` as that step's arguments.
async function agent(call: Call, tenant: string, skillId: string, name: string, args = ""): Promise<string> {
  const { agent } = await call<{ agent: { id: string } }>(tenant, "CreateAgent", { agent: { name, skillIds: [skillId], steps: [{ skillId, tool: "ok", arguments: args }] } });
  return agent.id;
}

async function skill(call: Call, tenant: string, mcpUrl: string): Promise<string> {
  return (await call<{ skill: { id: string } }>(tenant, "CreateSkill", { skill: { name: "tools", mcpUrl } })).skill.id;
}

async function source(call: Call, tenant: string, name: string, mapping?: string): Promise<string> {
  return (await call<{ token: string }>(tenant, "CreateWebhookSource", { webhookSource: { name, ...(mapping && { mapping }) } })).token;
}

async function trigger(call: Call, tenant: string, agentId: string, eventTypePattern: string, filter = ""): Promise<void> {
  await call(tenant, "CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern, ...(filter && { filter }) } } });
}

// A tenant with `sources` webhook sources, one agent whose runs call the
// bench's tool (`empty`: its plan emptied in the database, so its runs
// succeed without a call), and webhook triggers from `triggers` ([pattern,
// filter]); returns the sources' tokens.
async function seed(call: Call, dir: string, mcpUrl: string, slug: string, sources: number, triggers: [string, string][], empty: boolean): Promise<string[]> {
  const agentId = await agent(call, slug, await skill(call, slug, mcpUrl), "a");
  if (empty) await emptyPlan(dir, undefined, agentId);
  const tokens: string[] = [];
  for (let i = 0; i < sources; i++) tokens.push(await source(call, slug, `s${i}`));
  for (const [pattern, filter] of triggers) await trigger(call, slug, agentId, pattern, filter);
  return tokens;
}

// Tenant "amp": sources for its filters and runs, sources with an
// amplifying mapping, triggers with amplifying filters, and triggers that
// start agents with amplifying plan steps (the tool is never reached).
// Returns its sources' tokens.
async function seedAmplifying(call: Call, mcpUrl: string): Promise<{ plain: string[]; mapped: string[] }> {
  const slug = "amp";
  const plain = [await source(call, slug, "p0"), await source(call, slug, "p1")];
  const mapped = [await source(call, slug, "m0", AMPLIFYING_MAPPING), await source(call, slug, "m1", AMPLIFYING_MAPPING)];
  const skillId = await skill(call, slug, mcpUrl);
  const filtered = await agent(call, slug, skillId, "f");
  for (const filter of AMPLIFYING_FILTERS) await trigger(call, slug, filtered, "amp.*", filter);
  for (const [i, args] of AMPLIFYING_STEPS.entries()) await trigger(call, slug, await agent(call, slug, skillId, `s${i}`, args), "amp.*");
  return { plain, mapped };
}

// /healthz every 50 ms, so a blocked event loop shows as a slow answer.
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

// Quiet's events, open loop: each leaves at its scheduled time with a key of
// its own, its latency counted from that time. Up to 64 sockets, as a
// provider's sender opens what it needs: with 8, any answer slower than
// 100 ms would queue the next ones in the generator, not in the service.
async function quietLoad(url: string, token: string, seconds: number, phase: string): Promise<PacedWindow> {
  const load = pacedLoad({
    url: `${url}/webhooks/events`,
    headers: { "content-type": "application/json", "x-webhook-token": token },
    headersOf: (n) => ({ "idempotency-key": `quiet-${phase}-${n}` }),
    body: quietBody,
    rate: QUIET_RATE,
    seconds,
    sockets: 64,
  });
  await load.done;
  return load.window();
}

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
const ok = (w: PacedWindow) => Object.entries(w.statuses).reduce((n, [code, count]) => n + (code.startsWith("2") ? count : 0), 0);
const refusedOf = (w: PacedWindow) => w.sent - ok(w);

async function metric(url: string, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) if (pattern.test(line)) total += Number(line.split(" ").pop());
  return total;
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

async function main(): Promise<void> {
  const seconds = positiveInt("BENCH_DURATION", 10);
  const dir = scratchDir("agentplane-bench-");
  const { service, mcp, call, close } = await start(dir);
  const url = service.url;
  let exited = false;
  void service.exited.then(() => (exited = true));
  try {
    const quietTriggers: [string, string][] = [
      ...Array.from({ length: 8 }, (_, i): [string, string] => [`other.type.${i}`, ""]),
      ["order.*", "payload.total > 100 and payload.currency = 'EUR'"],
      ["order.*", "$contains(payload.customer.email, /@example\\.com$/)"],
    ];
    const [quietToken] = await seed(call, dir, mcp.url, "quiet", 1, quietTriggers, false);
    const noisyTokens = await seed(
      call,
      dir,
      mcp.url,
      "noisy",
      NOISY_SOURCES,
      Array.from({ length: NOISY_TRIGGERS }, (_, i): [string, string] => ["attack.*", HOSTILE_FILTERS[i % HOSTILE_FILTERS.length]!]),
      true,
    );
    const ampSources = await seedAmplifying(call, mcp.url);
    // Both of quiet's filters match once the sandbox processes have started
    // (the regular expression runs there, under the 50 ms filter budget, at
    // nice 10: on a machine loaded by other work it may not finish in time,
    // and after three misses it is suspended for a minute, as designed).
    await new Promise((r) => setTimeout(r, 3000));
    const check = await fetch(`${url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": quietToken! },
      body: quietBody(0),
    });
    const answer = (await check.json()) as { matched_triggers?: number };
    if (check.status !== 202 || !answer.matched_triggers) throw new Error(`preflight: ${check.status} ${JSON.stringify(answer)}`);
    if (answer.matched_triggers !== 2) console.log("preflight: quiet's sandboxed filter missed its budget (the machine is busy); the run goes on\n");

    console.log(`Tenant isolation: ${describeHost()}`);
    console.log(`agentplane serve (SQLite, its defaults); quiet: ${QUIET_RATE} events/s open loop (up to 64 sockets), runs calling a tool; noisy: 16 connections as fast as it can, ${NOISY_SOURCES} sources, ${NOISY_TRIGGERS} hostile filters; amp: 8 connections, ${AMPLIFYING_FILTERS.length} amplifying filters, 2 mapped sources, ${AMPLIFYING_STEPS.length} amplifying plans; ${seconds} s per phase\n`);
    const cpuStart = process.cpuUsage();
    const wallStart = performance.now();

    await quietLoad(url, quietToken!, 2, "warm"); // warm-up
    const aloneHealth = sampleHealthz(url);
    const alone = await quietLoad(url, quietToken!, seconds, "alone");
    const aloneSamples = await aloneHealth.stop();

    const floodHealth = sampleHealthz(url);
    const [beside, flood] = await Promise.all([quietLoad(url, quietToken!, seconds, "flood"), noisyLoad(url, noisyTokens, seconds)]);
    const floodSamples = await floodHealth.stop();

    const rssBefore = rssMb(service.child.pid!);
    const ampHealth = sampleHealthz(url);
    const [besideAmp, amp] = await Promise.all([quietLoad(url, quietToken!, seconds, "amp"), ampLoad(url, ampSources, seconds)]);
    const ampSamples = await ampHealth.stop();
    const rssAfter = rssMb(service.child.pid!);
    const cpu = process.cpuUsage(cpuStart);
    if (exited) throw new Error(`agentplane serve exited during the run:\n${service.output}`);

    const row = (phase: string, w: PacedWindow, health: number[]) => [
      phase,
      String(ok(w)),
      String(refusedOf(w)),
      fmt(latencyPercentile(w, 50)),
      fmt(latencyPercentile(w, 99)),
      fmt(max(w.latencies)),
      fmt(max(health)),
    ];
    printTable(
      ["quiet tenant", "2xx", "refused/failed", "p50 (ms)", "p99 (ms)", "max (ms)", "healthz max (ms)"],
      [row("alone", alone, aloneSamples), row("beside the flood", beside, floodSamples), row("beside amplification", besideAmp, ampSamples)],
    );
    const statuses = (w: PacedWindow) => `${Object.entries(w.statuses).map(([code, n]) => `${code}×${n}`).join(" ")}${w.errors ? `, ${w.errors} errors` : ""}`;
    console.log(`\nquiet's answers: alone ${statuses(alone)}; beside the flood ${statuses(beside)}; beside amplification ${statuses(besideAmp)}`);
    console.log(`noisy tenant: ${codes(flood)} (${flood.errors} errors, ${flood.timeouts} timeouts)`);
    console.log(
      `expression overruns: ${await metric(url, /^agentplane_expression_overruns_total\{/)}, ` +
        `filters skipped while suspended: ${await metric(url, /^agentplane_trigger_filter_failures_total\{reason="suspended"\}/)}`,
    );
    console.log(
      `amp tenant: ${codes(amp)} (${amp.errors} errors, ${amp.timeouts} timeouts); ` +
        `size-limited expressions: ${await metric(url, /^agentplane_expression_overruns_total\{.*reason="(limit|memory)"/)}; ` +
        `runs failed expression_limit: ${await metric(url, /^agentplane_runs_finished_total\{.*error_kind="expression_limit"/)}, ` +
        `succeeded: ${await metric(url, /^agentplane_runs_finished_total\{.*status="succeeded"/)}; ` +
        `service RSS ${rssBefore.toFixed(0)} → ${rssAfter.toFixed(0)} MB; tool calls: ${mcp.calls()}`,
    );
    if (process.env.BENCH_DUMP_METRICS) console.log((await (await fetch(`${url}/metrics`)).text()).split("\n").filter((l) => /^agentplane_(expression|trigger_filter)/.test(l)).join("\n"));
    console.log(`bench process CPU (generators, MCP server): ${(((cpu.user + cpu.system) / 1000 / (performance.now() - wallStart)) * 100).toFixed(0)} % of one core`);
    const report = (what: string, w: PacedWindow, health: number[], extra = "") => {
      const p99 = latencyPercentile(w, 99);
      const refused = refusedOf(w);
      console.log(
        `quiet p99 ${what}: ${fmt(p99)} ms (alone ${fmt(latencyPercentile(alone, 99))} ms; target < ${TARGET_P99_MS} ms: ${p99 < TARGET_P99_MS ? "met" : "NOT met"}); ` +
          `refused: ${refused} (target 0: ${refused === 0 ? "met" : "NOT met"}); ` +
          `healthz max: ${fmt(max(health))} ms (target < ${TARGET_HEALTHZ_MS} ms: ${max(health) < TARGET_HEALTHZ_MS ? "met" : "NOT met"})${extra}`,
      );
    };
    console.log("");
    report("beside the flood", beside, floodSamples);
    report("beside amplification", besideAmp, ampSamples, "; the service is alive");
    if (flood.statusCodeStats["500"] || amp.statusCodeStats["500"]) throw new Error("the server answered 500 under the flood");
  } finally {
    await close();
    removeScratchDir(dir);
  }
}

runBench(main);
