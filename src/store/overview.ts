// What the overview of a tenant's recent activity reads from the store: a
// window cut into fixed buckets, every figure aggregated by the database over
// the window's rows (found by the tenant's id-ordered indexes: ids are
// UUIDv7, so an id range is a time range), never the rows themselves.
import { RUN_STATUSES, type RunStatus } from "./types.js";

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

// The runs the overview counts as failures, and those it times (ended with
// both times known), in SQL both engines read alike.
export const FAILED_RUN = `status in ('failed', 'timed_out')`;
export const TIMED_RUN = `status in ('succeeded', 'failed', 'timed_out') and start_time is not null and end_time is not null`;

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
    // In one order, however the groups came: the rollups' and the live query's differ.
    failureWords: [...words.values()].sort((a, b) => a.status.localeCompare(b.status) || a.word.localeCompare(b.word)),
    queued: queue.n,
    ...(queue.oldestTime === undefined ? {} : { oldestQueuedTime: queue.oldestTime }),
  };
}

export interface OverviewStore {
  // The counts of the window: rollups for its sealed slots when its start
  // and bucket width are whole slots (readWindow), the live query for the
  // rest; the same answer either way.
  tenant(tenantId: string, query: OverviewQuery): Promise<OverviewCounts>;
  // Tenants with slots left to seal at `now` (no watermark yet, or one
  // before sealLimit(now)).
  unsealed(now: number): Promise<string[]>;
  // One pass over a tenant: rolls up the slots from its watermark to
  // sealUntil(…), in one transaction that also moves the watermark; two
  // processes sealing one tenant at once seal each slot once. How many
  // slots it sealed (0: none could be).
  seal(tenantId: string, now: number): Promise<number>;
}

// Sealed rollups (store/<engine>/overview-rollups.ts). The figures of a run
// change until it ends, never after (every update of a run is conditional on
// it being queued or running), and rows only appear at the time they are
// written. So a slot of SLOT_MS whose runs have all ended, and whose time is
// long past, has final figures: the sealer rolls them up once, into rows per
// slot and group (the RunGroup sets, and events), and the overview reads
// those rows instead of the runs. Nothing happens on the write path: a run
// costs nothing more when it is created, claimed or ended.
export const SLOT_MS = 15 * 60_000;
// Slots per tenant per pass, at most: a day, so that the first pass over a
// long history is not one long transaction; the sealer catches up pass by pass.
export const MAX_SEAL_SLOTS = 96;
// Where a tenant never sealed starts: nothing reads rollups further back than
// the longest window (the week of service/overview.ts), which starts after
// now − 7 days.
export const SEAL_LOOKBACK_MS = 7 * 86_400_000;

export const slotFloor = (ms: number) => Math.floor(ms / SLOT_MS) * SLOT_MS;

// The slot holding `now` and the one before stay live: a slot is sealed 15
// minutes after it ends at the earliest. A row lands in the slot of the time
// its writer read (create_time, receive_time), committed a moment later:
// within the store's statement timeouts (seconds), far inside 15 minutes,
// which also covers the replicas' clocks differing by minutes.
export const sealLimit = (now: number) => slotFloor(now) - SLOT_MS;

// A tenant's rollups cover the slots [sealedFrom, sealedUntil). sealedFrom
// moves up when retention deletes the slots before it, so a window reaching
// further back reads the live query there, like the slots not sealed yet.
export interface Watermark {
  sealedFrom: number;
  sealedUntil: number;
}

// The watermark a tenant's first pass starts from.
export const firstWatermark = (now: number): Watermark => {
  const from = slotFloor(now - SEAL_LOOKBACK_MS);
  return { sealedFrom: from, sealedUntil: from };
};

// Where a pass stops sealing: at sealLimit(now), a day on at most, and at the
// slot of the tenant's oldest run not ended (created at or after the
// watermark: `oldestOpen`, its create time), which must stay live until it
// ends. Never before the watermark.
export function sealUntil(w: Watermark, now: number, oldestOpen: number | undefined): number {
  const limit = Math.min(sealLimit(now), w.sealedUntil + MAX_SEAL_SLOTS * SLOT_MS, oldestOpen === undefined ? Infinity : slotFloor(oldestOpen));
  return Math.max(w.sealedUntil, limit);
}

// The part of a window the rollups answer, [from, to) (none when the window
// is not cut in whole slots, as the hour's minutes are not), and the ranges
// the live query answers: before the rollups and after them.
export function readWindow(q: OverviewQuery, w: Watermark | undefined): { rolled?: { from: number; to: number }; live: { from: number; to: number }[] } {
  const end = q.start + q.buckets * q.bucketMs;
  const from = Math.max(q.start, w?.sealedFrom ?? 0);
  const to = Math.min(end, w?.sealedUntil ?? 0);
  if (!w || q.start % SLOT_MS || q.bucketMs % SLOT_MS || from >= to) return { live: [{ from: q.start, to: end }] };
  const live = [
    { from: q.start, to: from },
    { from: to, to: end },
  ].filter((r) => r.from < r.to);
  return { rolled: { from, to }, live };
}

// One row of overview_rollups, summed over the slots read: `bucket` is set
// for the kinds counted per bucket (a run's bucket and status; events).
export interface RollupRow {
  kind: RunGroup["set"] | "events";
  status: string;
  key: string;
  bucket: number | null;
  n: number;
  failures: number;
}

// Rollup rows as the groups and event counts the live query gives.
export function fromRollups(rows: RollupRow[]): { groups: RunGroup[]; events: { bucket: number; n: number }[] } {
  const groups: RunGroup[] = [];
  const events: { bucket: number; n: number }[] = [];
  for (const r of rows) {
    if (r.kind === "events") events.push({ bucket: r.bucket!, n: r.n });
    else if (r.kind === "bucket") groups.push({ set: "bucket", bucket: r.bucket!, status: r.status as RunStatus, n: r.n });
    else if (r.kind === "agent" || r.kind === "trigger") groups.push({ set: r.kind, id: r.key, n: r.n, failures: r.failures });
    else if (r.kind === "word") groups.push({ set: "word", status: r.status as "failed" | "timed_out", word: r.key, n: r.n });
    else groups.push({ set: "duration", ms: Number(r.key), n: r.n });
  }
  return { groups, events };
}

// The leading word of a run's error, as service/error-kinds.ts reads it; the
// engines evaluate it in the database (PostgreSQL: the same pattern with
// `\y` for `\b`; SQLite: this one, as a registered function).
export const LEADING_WORD = /^(?:steps\[\d+\][^:]*: )?([a-z_]+)\b/;

// Ids are made when their row is, but not in the same millisecond as the
// time column they are read with: the id range is this much wider than the
// window, the time column then cut exactly.
export const ID_MARGIN_MS = 60_000;

function emptyRuns(buckets: number): Record<RunStatus, number[]> {
  return Object.fromEntries(RUN_STATUSES.map((s) => [s, new Array<number>(buckets).fill(0)])) as Record<RunStatus, number[]>;
}
