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
  // many, and the nearest-rank 50th and 95th percentile of end − start.
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

export interface OverviewStore {
  tenant(tenantId: string, query: OverviewQuery): Promise<OverviewCounts>;
}

// The leading word of a run's error, as runtime/error-kinds.ts reads it; the
// engines evaluate it in the database (PostgreSQL: the same pattern with
// `\y` for `\b`; SQLite: this one, as a registered function).
export const LEADING_WORD = /^(?:steps\[\d+\][^:]*: )?([a-z_]+)\b/;

// Ids are made when their row is, but not in the same millisecond as the
// time column they are read with: the id range is this much wider than the
// window, the time column then cut exactly.
export const ID_MARGIN_MS = 60_000;

export const RUN_STATUSES: readonly RunStatus[] = ["queued", "running", "succeeded", "failed", "cancelled", "timed_out"];

export function emptyRuns(buckets: number): Record<RunStatus, number[]> {
  return Object.fromEntries(RUN_STATUSES.map((s) => [s, new Array<number>(buckets).fill(0)])) as Record<RunStatus, number[]>;
}
