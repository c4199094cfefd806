// HTTP load with autocannon, shared by the throughput benches: the settings
// from the environment, a run that fails loudly on anything but success, and
// the summary table over repeated runs.
import { createRequire } from "node:module";
import autocannon, { type Result } from "autocannon";
import { nonNegativeInt, positiveInt } from "./env.js";
import { mean } from "./stats.js";
import { printTable } from "./table.js";

type SetupRequest = (request: object) => object;

export interface LoadOptions {
  connections: number;
  // autocannon worker threads; 0 generates load on the calling thread.
  workers: number;
}

export interface LoadSettings extends LoadOptions {
  // Seconds per measured run.
  duration: number;
}

// BENCH_DURATION (default 10 s), BENCH_CONNECTIONS (50) and BENCH_WORKERS (1).
export function loadSettingsFromEnv(): LoadSettings {
  const duration = positiveInt("BENCH_DURATION", 10);
  const connections = positiveInt("BENCH_CONNECTIONS", 50);
  // 1 (default): autocannon generates load from a worker thread, so the
  // servers' event loop is not shared with the load generator.
  const workers = nonNegativeInt("BENCH_WORKERS", 1);
  return { duration, connections, workers };
}

// "50 connections, load generator on 1 worker thread(s)", for a bench's header.
export function describeLoad(opts: LoadOptions): string {
  return `${opts.connections} connections, load generator on ${opts.workers === 0 ? "the main thread" : `${opts.workers} worker thread(s)`}`;
}

export interface LoadRun extends LoadOptions {
  // Who is loaded and which load this is ("warm-up", "run 3"), for the error.
  name: string;
  label: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  seconds: number;
  // When set, a status code other than this one fails the run too
  // (autocannon counts every 2xx alike).
  onlyStatus?: string;
  // Each request gets a new id wherever `[<id>]` appears in its headers or
  // body (distinct idempotency keys, as real senders send).
  idReplacement?: boolean;
  // A CommonJS module whose default export rewrites each request (autocannon's
  // `setupRequest`; a path, since autocannon's worker threads require() it).
  setupRequest?: string;
}

// POSTs `body` to `url` for `seconds`. Throws when any request was not
// answered 2xx (or not `onlyStatus`), errored or timed out, or none succeeded.
export async function runLoad(run: LoadRun): Promise<Result> {
  const result = await autocannon({
    url: run.url,
    method: "POST",
    headers: run.headers,
    body: run.body,
    connections: run.connections,
    duration: run.seconds,
    workers: run.workers,
    idReplacement: run.idReplacement,
    ...(run.setupRequest && {
      requests: [{ setupRequest: run.workers ? run.setupRequest : (createRequire(import.meta.url)(run.setupRequest) as SetupRequest) }],
    }),
  });
  const bad =
    result.non2xx !== 0 ||
    result.errors !== 0 ||
    result.timeouts !== 0 ||
    result["2xx"] === 0 ||
    (run.onlyStatus !== undefined && Object.keys(result.statusCodeStats).some((c) => c !== run.onlyStatus));
  if (bad) {
    const codes = Object.entries(result.statusCodeStats)
      .map(([code, { count }]) => `${code}×${count}`)
      .join(", ");
    throw new Error(
      `${run.name} (${run.label}): ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts, ` +
        `${result["2xx"]} 2xx [status codes: ${codes || "none"}]`,
    );
  }
  return result;
}

// Completed (all 2xx) requests over the run's measured wall time. Steadier than
// the mean of autocannon's 1 s samples, which can miss a tick when the load
// generator's thread is starved of CPU.
export const perSec = (r: Result): number => r["2xx"] / r.duration;

export interface LoadSummary {
  name: string;
  // Mean of the runs' perSec.
  perSec: number;
  runs: number[];
  // Means of the runs' latency percentiles, ms.
  p50: number;
  p99: number;
  // 2xx over all runs.
  requests: number;
}

export function summarize(name: string, results: Result[]): LoadSummary {
  return {
    name,
    perSec: mean(results.map(perSec)),
    runs: results.map(perSec),
    p50: mean(results.map((r) => r.latency.p50)),
    p99: mean(results.map((r) => r.latency.p99)),
    requests: results.reduce((a, r) => a + r["2xx"], 0),
  };
}

export interface LoadTableLabels {
  // Header of the first column, what a row is: "server", "target".
  subject: string;
  // What perSec counts: "req/s", "events/s".
  unit: string;
}

export function printLoadTable(rows: LoadSummary[], labels: LoadTableLabels): void {
  const header = [labels.subject, `${labels.unit} (mean)`, `runs (${labels.unit})`, "p50 (ms)", "p99 (ms)", "2xx total"];
  const cells = rows.map((r) => [
    r.name,
    r.perSec.toFixed(0),
    r.runs.map((x) => x.toFixed(0)).join(" / "),
    r.p50.toFixed(1),
    r.p99.toFixed(1),
    String(r.requests),
  ]);
  printTable(header, cells);
}
