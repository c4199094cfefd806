// An open-loop load generator: requests leave on a fixed schedule (`rate` per
// second) whether or not earlier ones were answered, so a slow server meets
// the same offered load instead of slowing the generator down (a closed loop
// of N connections would). Latency is measured from each request's scheduled
// time, so queueing in the generator counts against the server. Reports its
// own CPU time, to show whether the generator itself kept up.
import { Agent, request } from "node:http";
import { percentile } from "./stats.js";

export interface PacedOptions {
  url: string;
  headers: Record<string, string>;
  // The body of the n-th request, and headers of its own (an idempotency key).
  body: (n: number) => string;
  headersOf?: (n: number) => Record<string, string>;
  rate: number;
  seconds: number;
  // Sockets at most (requests past them wait in the generator, still timed
  // from their schedule).
  sockets: number;
}

export interface PacedWindow {
  sent: number;
  answered: number;
  // Latencies (ms) of the answers received since the last window.
  latencies: number[];
  statuses: Record<string, number>;
  errors: number;
}

export interface PacedLoad {
  // The figures since the previous call (or the start), then reset.
  window(): PacedWindow;
  // Resolves when every scheduled request has been answered or has failed.
  done: Promise<void>;
  // CPU the generator's process used (user + system, ms) and its wall time (ms).
  cpu(): { cpuMs: number; wallMs: number };
}

// Far beyond any latency a bench reports, well within a run.
const IDLE_TIMEOUT_MS = 60_000;

export function pacedLoad(options: PacedOptions): PacedLoad {
  const agent = new Agent({ keepAlive: true, maxSockets: options.sockets });
  const total = Math.round(options.rate * options.seconds);
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  let sent = 0;
  let settled = 0;
  let current: PacedWindow = { sent: 0, answered: 0, latencies: [], statuses: {}, errors: 0 };
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));

  const settle = () => {
    if (++settled === total) {
      agent.destroy();
      finish();
    }
  };
  const send = (n: number) => {
    const scheduled = started + (n * 1000) / options.rate;
    const body = options.body(n);
    // Each request settles once: its answer's end, or its first error.
    let over = false;
    const failed = () => {
      if (over) return;
      over = true;
      current.errors++;
      settle();
    };
    const req = request(options.url, { method: "POST", agent, headers: { ...options.headers, ...options.headersOf?.(n), "content-length": Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on("error", failed);
      res.on("end", () => {
        if (over) return;
        over = true;
        current.answered++;
        current.latencies.push(performance.now() - scheduled);
        const code = String(res.statusCode);
        current.statuses[code] = (current.statuses[code] ?? 0) + 1;
        settle();
      });
    });
    req.on("error", failed);
    // A socket silent this long (a server that stopped answering, an answer
    // cut off after its headers) fails its request, so `done` still comes.
    req.setTimeout(IDLE_TIMEOUT_MS, () => req.destroy(new Error("no answer")));
    req.end(body);
    current.sent++;
  };
  // Request n is due at started + n / rate: once that time has come, n + 1
  // requests are due (until 2026-11-26 this counted n, so each request left
  // one interval late, 12.5 ms at 80/s, and that delay was in every figure).
  // A 1 ms tick: the generator's own lateness is counted, so kept small.
  const tick = setInterval(() => {
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * options.rate) + 1);
    while (sent < due) send(sent++);
    if (sent === total) clearInterval(tick);
  }, 1);
  if (total === 0) finish();

  return {
    window() {
      const w = current;
      current = { sent: 0, answered: 0, latencies: [], statuses: {}, errors: 0 };
      return w;
    },
    done,
    cpu() {
      const c = process.cpuUsage(cpuStart);
      return { cpuMs: (c.user + c.system) / 1000, wallMs: performance.now() - started };
    },
  };
}

// The p-th percentile of a window's latencies, or NaN when it has none.
export const latencyPercentile = (w: PacedWindow, p: number): number => (w.latencies.length ? percentile(w.latencies, p) : NaN);
