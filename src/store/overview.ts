// What the overview of a tenant's recent activity reads from the store: a
// window cut into fixed buckets, every figure aggregated by the database over
// the window's rows (found by the tenant's id-ordered indexes: ids are
// UUIDv7, so an id range is a time range), never the rows themselves.
import type { RunStatus } from "./types.js";

export interface OverviewQuery {
  // Start of the first bucket (ms, inclusive); the window ends, exclusive, at
  // start + buckets × bucketMs.
  start: number;
  bucketMs: number;
  buckets: number;
  // How many agents and triggers with the most failures.
  top: number;
}

// A failure is a run that ended `failed` or `timed_out`.
export interface FailingRecord {
  id: string;
  failures: number;
  // Every run of it created in the window, failures included.
  runs: number;
}

export interface OverviewCounts {
  // Events received, per bucket (by receive time).
  events: number[];
  // Runs created, per bucket (by create time) and status: each array has one
  // entry per bucket.
  runs: Record<RunStatus, number[]>;
  // Runs created in the window that ended with a start and end time: how
  // many, and the nearest-rank 50th and 95th percentile of end − start (at
  // three significant digits, DURATION_KEY).
  durations: { count: number; p50Ms: number; p95Ms: number };
  // Most failures first, ties by id; only records with a failure.
  failingAgents: FailingRecord[];
  failingTriggers: FailingRecord[];
  // Failed runs by the leading word of their error ("steps[n] (tool): "
  // skipped), timed-out runs under the word "" : the service names the kinds.
  failureWords: { status: "failed" | "timed_out"; word: string; count: number }[];
  // Now, whatever the window: runs waiting to be claimed, and when the
  // oldest of them was created.
  queued: number;
  oldestQueuedTime?: number;
}

// One row of the engines' grouped answer: a count of the window's runs
// for one value of one dimension. The engines compute them in one pass
// (PostgreSQL, GROUPING SETS) or one statement each (SQLite); `foldGroups`
// makes the counts of them, the same for both.
export type RunGroup =
  | { set: "bucket"; bucket: number; status: RunStatus; n: number }
  | { set: "agent"; id: string; n: number; failures: number }
  | { set: "trigger"; id: string; n: number; failures: number }
  | { set: "word"; status: "failed" | "timed_out"; word: string; n: number }
  | { set: "duration"; ms: number; n: number };

// Durations are grouped at three significant digits (a run of 12,345 ms
// counts as 12,300 ms), so their groups stay few, however many runs: at
// most 900 per power of ten. The same CASE on both engines.
export const DURATION_KEY = (d: string) =>
  `case when ${d} < 1000 then ${d} ${[4, 5, 6, 7, 8, 9, 10]
    .map((k) => `when ${d} < 1${"0".repeat(k)} then ${d} - ${d} % 1${"0".repeat(k - 3)}`)
    .join(" ")} else ${d} - ${d} % 100000000 end`;

// Nearest rank: the smallest value with at least p of them at or below it.
function percentile(sorted: { ms: number; n: number }[], total: number, p: number): number {
  const rank = Math.max(1, Math.ceil(p * total));
  let seen = 0;
  for (const d of sorted) {
    seen += d.n;
    if (seen >= rank) return d.ms;
  }
  return 0;
}

export function foldGroups(q: OverviewQuery, groups: Iterable<RunGroup>, events: { bucket: number; n: number }[], queue: { n: number; oldestTime?: number }): OverviewCounts {
  const runs = emptyRuns(q.buckets);
  const agents = new Map<string, FailingRecord>();
  const triggers = new Map<string, FailingRecord>();
  const words = new Map<string, { status: "failed" | "timed_out"; word: string; count: number }>();
  const durations = new Map<number, number>();
  const add = (m: Map<string, FailingRecord>, id: string, n: number, failures: number) => {
    const r = m.get(id) ?? { id, failures: 0, runs: 0 };
    r.runs += n;
    r.failures += failures;
    m.set(id, r);
  };
  for (const g of groups) {
    if (g.set === "bucket") runs[g.status][g.bucket] = (runs[g.status][g.bucket] ?? 0) + g.n;
    else if (g.set === "agent") add(agents, g.id, g.n, g.failures);
    else if (g.set === "trigger") add(triggers, g.id, g.n, g.failures);
    else if (g.set === "word") {
      const key = `${g.status} ${g.word}`;
      const w = words.get(key) ?? { status: g.status, word: g.word, count: 0 };
      w.count += g.n;
      words.set(key, w);
    } else durations.set(g.ms, (durations.get(g.ms) ?? 0) + g.n);
  }
  const top = (m: Map<string, FailingRecord>) =>
    [...m.values()].filter((r) => r.failures > 0).sort((a, b) => b.failures - a.failures || (a.id < b.id ? -1 : 1)).slice(0, q.top);
  const sorted = [...durations].map(([ms, n]) => ({ ms, n })).sort((a, b) => a.ms - b.ms);
  const ended = sorted.reduce((a, d) => a + d.n, 0);
  const perBucket = new Array<number>(q.buckets).fill(0);
  for (const e of events) perBucket[e.bucket] = (perBucket[e.bucket] ?? 0) + e.n;
  return {
    events: perBucket,
    runs,
    durations: { count: ended, p50Ms: percentile(sorted, ended, 0.5), p95Ms: percentile(sorted, ended, 0.95) },
    failingAgents: top(agents),
    failingTriggers: top(triggers),
    failureWords: [...words.values()],
    queued: queue.n,
    ...(queue.oldestTime === undefined ? {} : { oldestQueuedTime: queue.oldestTime }),
  };
}

export interface OverviewStore {
  tenant(tenantId: string, query: OverviewQuery): Promise<OverviewCounts>;
}

// The leading word of a run's error, as service/error-kinds.ts reads it; the
// engines evaluate it in the database (PostgreSQL: the same pattern with
// `\y` for `\b`; SQLite: this one, as a registered function).
export const LEADING_WORD = /^(?:steps\[\d+\][^:]*: )?([a-z_]+)\b/;

// Ids are made when their row is, but not in the same millisecond as the
// time column they are read with: the id range is this much wider than the
// window, the time column then cut exactly.
export const ID_MARGIN_MS = 60_000;

export const RUN_STATUSES: readonly RunStatus[] = ["queued", "running", "succeeded", "failed", "cancelled", "timed_out"];

function emptyRuns(buckets: number): Record<RunStatus, number[]> {
  return Object.fromEntries(RUN_STATUSES.map((s) => [s, new Array<number>(buckets).fill(0)])) as Record<RunStatus, number[]>;
}
