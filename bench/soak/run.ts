// Soak: the built `agentplane serve` (SQLite by default) takes webhooks at a
// steady open-loop rate for a long time (30 min by default), each event's run
// calling a tool on a real MCP server (the guide's hello-mcp, the MCP SDK's
// server, in a process of its own); the bench samples the service's RSS and
// every thread's V8 heap, and checks that RSS levels off: its peak over the
// last third of the run is at most a bound above its peak over the middle
// third. Writes the samples (CSV) and a plot (SVG) of them.
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { nonNegativeInt, positiveInt } from "../lib/env.js";
import { MCP_NAMES, mcpKind, startMcpServer } from "../lib/mcp-servers.js";
import { latencyPercentile, pacedLoad } from "../lib/paced.js";
import { freshDatabase } from "../lib/postgres.js";
import { describeHost, removeScratchDir, runBench, scratchDir } from "../lib/run.js";
import { CLI, counter, drain, emptyPlan, freePort, Service, sleep, startJwks, SUBJECT } from "../lib/serve.js";
import { slope } from "../lib/stats.js";
import { lineChart, type Series } from "../lib/svg-plot.js";
import { printTable } from "../lib/table.js";

const exec = promisify(execFile);
const HERE = dirname(fileURLToPath(import.meta.url));
// dist/bench/soak → the repository root.
const ROOT = resolve(HERE, "../../..");
const PRELOAD = join(HERE, "thread-heap.cjs");

const MINUTES = positiveInt("BENCH_SOAK_MINUTES", 30);
const RATE = positiveInt("BENCH_RATE", 250);
const SAMPLE_SECONDS = positiveInt("BENCH_SOAK_SAMPLE_SECONDS", 5);
// RSS levels off when its peak over the run's last third is at most this
// many MB above its peak over the middle third (peaks, not a fitted line:
// garbage collection makes RSS a sawtooth tens of MB high).
const MAX_GROWTH = Number(process.env.BENCH_SOAK_MAX_GROWTH_MB ?? "16");
const ENGINE = process.env.BENCH_ENGINES ?? "sqlite";
const RUNS = process.env.BENCH_RUNS ?? "step";
const THREADS = process.env.BENCH_SOAK_THREADS;
// hello: the guide's hello-mcp (the SDK's server, its own process), tool
// `add` with arguments computed from the event (JSONata, in the expression
// sandbox); trivial: bench/lib/trivial-mcp.ts in the bench process, tool `ok`
// without arguments (no expression evaluated: the MCP path alone).
const MCP = mcpKind("BENCH_SOAK_MCP", "hello");
const SOCKETS = nonNegativeInt("BENCH_PACED_CONNECTIONS", 200);
const OUT = resolve(process.env.BENCH_SOAK_OUT ?? join(ROOT, "bench/soak"));
if (ENGINE !== "sqlite" && ENGINE !== "postgres") throw new Error(`BENCH_ENGINES: "sqlite" or "postgres" (one), got "${ENGINE}"`);
if (RUNS !== "step" && RUNS !== "empty") throw new Error(`BENCH_RUNS: "step" or "empty", got "${RUNS}"`);
if (!(MAX_GROWTH >= 0)) throw new Error("BENCH_SOAK_MAX_GROWTH_MB must be a non-negative number");

const BODY = (n: number) => JSON.stringify({ event_type: "order.created", payload: { order: n, note: "x".repeat(900) } });
const MB = 1024 * 1024;

interface Sample {
  minute: number;
  rssMb: number;
  anonMb: number;
  mcpRssMb: number;
  // V8 used heap per thread id (0: the main thread), MB.
  heaps: Map<number, number>;
  acked: number;
  p99: number;
  backlog: number;
  done: number;
}

// Resident set size of a process, from /proc (Linux), MB: all of it, or
// only its anonymous memory (heaps, malloc) without mapped files.
function rssMb(pid: number, field: "VmRSS" | "RssAnon" = "VmRSS"): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

// The last heap figure each thread of `pid` wrote (see thread-heap.cts), MB.
function threadHeaps(dir: string, pid: number): Map<number, number> {
  const heaps = new Map<number, number>();
  for (const f of readdirSync(dir).filter((n) => n.startsWith(`heap-${pid}-`))) {
    const lines = readFileSync(join(dir, f), "utf8").trimEnd().split("\n");
    const last = JSON.parse(lines[lines.length - 1]!) as { thread: number; used: number };
    heaps.set(last.thread, last.used / MB);
  }
  return heaps;
}

function writePlot(samples: Sample[], title: string): string {
  const threads = [...new Set(samples.flatMap((s) => [...s.heaps.keys()]))].sort((a, b) => a - b);
  const colors = ["#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"];
  const series: Series[] = [
    { name: "serve RSS", color: "#d62728", points: samples.map((s) => ({ x: s.minute, y: s.rssMb })) },
    { name: "serve RSS, anonymous", color: "#1f77b4", points: samples.map((s) => ({ x: s.minute, y: s.anonMb })) },
    ...threads.map((t, i) => ({
      name: t === 0 ? "main thread heap" : `thread ${t} heap`,
      color: colors[i % colors.length]!,
      points: samples.filter((s) => s.heaps.has(t)).map((s) => ({ x: s.minute, y: s.heaps.get(t)! })),
    })),
    { name: MCP === "hello" ? "MCP server RSS" : "bench process RSS", color: "#7f7f7f", points: samples.map((s) => ({ x: s.minute, y: s.mcpRssMb })) },
  ];
  mkdirSync(OUT, { recursive: true });
  const svg = join(OUT, "soak.svg");
  writeFileSync(svg, lineChart(title, "minutes", "MB", series));
  const csv = [
    ["minute", "rss_mb", "rss_anon_mb", "mcp_rss_mb", ...threads.map((t) => `heap_thread_${t}_mb`), "acked", "ack_p99_ms", "backlog", "runs_done"].join(","),
    ...samples.map((s) =>
      [s.minute.toFixed(3), s.rssMb.toFixed(1), s.anonMb.toFixed(1), s.mcpRssMb.toFixed(1), ...threads.map((t) => s.heaps.get(t)?.toFixed(1) ?? ""), s.acked, s.p99.toFixed(1), s.backlog, s.done].join(","),
    ),
  ].join("\n");
  writeFileSync(join(OUT, "soak.csv"), `${csv}\n`);
  return svg;
}

async function main(): Promise<void> {
  const seconds = MINUTES * 60;
  console.log(`soak (${ENGINE}, runs: ${RUNS === "step" ? `one tool call on ${MCP_NAMES[MCP]}` : "empty plans"}): ${RATE} events/s for ${MINUTES} min, open loop, sampled every ${SAMPLE_SECONDS} s`);
  console.log(describeHost());
  const dir = scratchDir("agentplane-bench-soak-");
  mkdirSync(OUT, { recursive: true });
  const heapDir = join(dir, "heaps");
  mkdirSync(heapDir);
  const db = ENGINE === "postgres" ? await freshDatabase() : undefined;
  const jwks = await startJwks();
  const mcp = await startMcpServer(MCP);
  let service: Service | undefined;
  try {
    await exec(process.execPath, [CLI, "tenant", "create", "bench", "--admin", SUBJECT], {
      env: { PATH: process.env.PATH ?? "", AGENTPLANE_DATA_DIR: dir, ...(db && { AGENTPLANE_DATABASE_URL: db.url }) },
    });
    service = new Service(dir, await freePort(), jwks.url, { BENCH_SOAK_HEAP_DIR: heapDir, BENCH_SOAK_SNAPSHOT_DIR: OUT, BENCH_SOAK_SNAPSHOTS: process.env.BENCH_SOAK_SNAPSHOTS ?? "", BENCH_SOAK_HEAP_EVERY_MS: String(SAMPLE_SECONDS * 1000), ...(THREADS !== undefined && { AGENTPLANE_WORKER_THREADS: THREADS }) }, db?.url, ["--require", PRELOAD]);
    await service.ready();
    const { skill } = await service.call<{ skill: { id: string } }>(jwks.token, "CreateSkill", { skill: { name: "hello", mcpUrl: mcp.url } });
    const { agent } = await service.call<{ agent: { id: string } }>(jwks.token, "CreateAgent", {
      agent: { name: "soak", skillIds: [skill.id], steps: [{ skillId: skill.id, tool: mcp.tool.name, arguments: mcp.tool.arguments }] },
    });
    if (RUNS === "empty") await emptyPlan(dir, db?.url, agent.id);
    await service.call(jwks.token, "CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*" } } });
    const { token } = await service.call<{ token: string }>(jwks.token, "CreateWebhookSource", { webhookSource: { name: "soak" } });
    const count = counter(dir, db?.url);
    try {
      // Preflight: one event, its run succeeds.
      const res = await fetch(`${service.url}/webhooks/events`, { method: "POST", headers: { "content-type": "application/json", "x-webhook-token": token }, body: BODY(0) });
      if (res.status !== 202) throw new Error(`preflight: ${res.status} ${await res.text()}`);
      if ((await drain(count, 60_000)) === undefined || (await count.counts()).done !== 1) throw new Error(`preflight: the run did not succeed:\n${service.output}`);

      const load = pacedLoad({
        url: `${service.url}/webhooks/events`,
        headers: { "content-type": "application/json", "x-webhook-token": token },
        body: BODY,
        rate: RATE,
        seconds,
        sockets: SOCKETS,
      });
      const samples: Sample[] = [];
      const statuses: Record<string, number> = {};
      let errors = 0;
      const started = Date.now();
      let exited = false;
      void service.exited.then(() => (exited = true));
      let finished = false;
      void load.done.then(() => (finished = true));
      const take = async () => {
        const w = load.window();
        for (const [k, v] of Object.entries(w.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
        errors += w.errors;
        const c = await count.counts();
        samples.push({
          minute: (Date.now() - started) / 60_000,
          rssMb: rssMb(service!.child.pid!),
          anonMb: rssMb(service!.child.pid!, "RssAnon"),
          mcpRssMb: rssMb(mcp.pid),
          heaps: threadHeaps(heapDir, service!.child.pid!),
          acked: w.answered,
          p99: latencyPercentile(w, 99),
          backlog: c.backlog,
          done: c.done,
        });
      };
      await take();
      let lastPrint = 0;
      while (!finished) {
        await Promise.race([sleep(SAMPLE_SECONDS * 1000), load.done]);
        if (exited) throw new Error(`agentplane serve exited during the soak:\n${service.output}`);
        await take();
        const s = samples[samples.length - 1]!;
        if (s.minute - lastPrint >= 1 || finished) {
          lastPrint = Math.floor(s.minute);
          const heaps = [...s.heaps.entries()].map(([t, mb]) => `t${t} ${mb.toFixed(0)}`).join(" ");
          console.log(`  ${s.minute.toFixed(1)} min: RSS ${s.rssMb.toFixed(0)} MB (anon ${s.anonMb.toFixed(0)}), heaps ${heaps} MB, backlog ${s.backlog}, runs done ${s.done}, ack p99 ${s.p99.toFixed(0)} ms`);
        }
      }
      const cpu = load.cpu();
      const failed = (await count.counts()).failed;
      await service.stop();
      if (failed) console.log(`${failed} runs failed; the service's last log lines:\n${service.output.trimEnd().split("\n").slice(-5).join("\n")}`);

      // Level-off check: the last third's peak against the middle third's.
      const first = samples[0]!;
      const last = samples[samples.length - 1]!;
      const third = (k: number) => samples.filter((s) => s.minute >= (last.minute * k) / 3 && s.minute <= (last.minute * (k + 1)) / 3);
      const peakOf = (xs: Sample[]) => Math.max(...xs.map((s) => s.rssMb));
      const growth = peakOf(third(2)) - peakOf(third(1));
      const half = samples.filter((s) => s.minute >= last.minute / 2);
      const lastHalfSlope = slope(half.map((s) => ({ x: s.minute, y: s.rssMb })));
      const peak = Math.max(...samples.map((s) => s.rssMb));
      const svg = writePlot(samples, `agentplane serve (${ENGINE}, ${RUNS}), ${RATE} events/s for ${MINUTES} min`);
      console.log();
      printTable(
        ["minute", "RSS MB", "anon MB", "main heap MB", "worker heaps MB", "MCP RSS MB", "acks", "ack p99 ms", "backlog", "runs done"],
        samples
          .filter((s, i) => i === 0 || i === samples.length - 1 || Math.floor(s.minute) !== Math.floor(samples[i - 1]!.minute))
          .map((s) => [
            s.minute.toFixed(1),
            s.rssMb.toFixed(0),
            s.anonMb.toFixed(0),
            (s.heaps.get(0) ?? NaN).toFixed(0),
            [...s.heaps.entries()].filter(([t]) => t !== 0).map(([, mb]) => mb.toFixed(0)).join(" / ") || "-",
            s.mcpRssMb.toFixed(0),
            String(s.acked),
            s.p99.toFixed(0),
            String(s.backlog),
            String(s.done),
          ]),
      );
      console.log();
      const sent = Object.values(statuses).reduce((a, b) => a + b, 0) + errors;
      console.log(`sent ${sent} events (${RATE}/s offered), answers ${JSON.stringify(statuses)}, ${errors} errors; ${failed} runs failed`);
      console.log(`load generator CPU: ${((cpu.cpuMs / cpu.wallMs) * 100).toFixed(1)} % of one core over ${(cpu.wallMs / 1000).toFixed(0)} s`);
      console.log(`RSS: ${first.rssMb.toFixed(0)} MB at start, ${peak.toFixed(0)} MB peak, ${last.rssMb.toFixed(0)} MB at the end`);
      console.log(`RSS slope over the last half (${half[0]!.minute.toFixed(1)}–${last.minute.toFixed(1)} min): ${lastHalfSlope.toFixed(2)} MB/min`);
      console.log(
        `RSS peak: ${peakOf(third(1)).toFixed(0)} MB in the middle third, ${peakOf(third(2)).toFixed(0)} MB in the last third (${growth >= 0 ? "+" : ""}${growth.toFixed(0)} MB; bound +${MAX_GROWTH}: ${growth <= MAX_GROWTH ? "levels off" : "STILL GROWING"})`,
      );
      console.log(`plot: ${svg}; samples: ${join(OUT, "soak.csv")}`);
      if (growth > MAX_GROWTH) throw new Error(`RSS still grows: its peak rose ${growth.toFixed(0)} MB from the middle third of the soak to the last`);
      if (statuses["202"] !== sent) throw new Error("not every event was answered 202");
    } finally {
      await count.close();
    }
  } finally {
    service?.child.kill("SIGKILL");
    await mcp.stop();
    jwks.close();
    await db?.drop();
    removeScratchDir(dir);
  }
}

runBench(main);
