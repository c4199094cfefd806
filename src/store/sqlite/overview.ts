// The tenant overview on SQLite: the same aggregates as PostgreSQL's
// (store/postgres/overview.ts), each a statement prepared once, over the
// window's rows found by the tenant's (tenant_id, id) index. Percentiles by
// rank: SQLite has no ordered-set aggregate.
import type Database from "better-sqlite3";
import { idFloor, idTime } from "../../lib/ids.js";
import { ID_MARGIN_MS, LEADING_WORD, emptyRuns, type FailingRecord, type OverviewCounts, type OverviewQuery, type OverviewStore } from "../overview.js";
import type { RunStatus } from "../types.js";
import { run } from "./errors.js";

const FAILED = `status in ('failed', 'timed_out')`;
const ENDED = `status in ('succeeded', 'failed', 'timed_out') and start_time is not null and end_time is not null`;
const IN_RUNS = `tenant_id = :tenant and id >= :lo and id < :hi and create_time >= :start and create_time < :end`;

interface Window {
  tenant: string;
  lo: string;
  hi: string;
  start: number;
  end: number;
}

export function createSqliteOverview(raw: Database.Database): OverviewStore {
  raw.function("leading_word", { deterministic: true }, (error: unknown) =>
    typeof error === "string" ? (LEADING_WORD.exec(error)?.[1] ?? "") : "",
  );
  const events = raw.prepare<Window & { bucket: number }, { bucket: number; n: number }>(
    `select (receive_time - :start) / :bucket as bucket, count(*) as n from events
     where tenant_id = :tenant and id >= :lo and id < :hi and receive_time >= :start and receive_time < :end group by 1`,
  );
  const buckets = raw.prepare<Window & { bucket: number }, { bucket: number; status: RunStatus; n: number }>(
    `select (create_time - :start) / :bucket as bucket, status, count(*) as n from runs where ${IN_RUNS} group by 1, 2`,
  );
  const ended = raw.prepare<Window, number>(`select count(*) from runs where ${IN_RUNS} and ${ENDED}`).pluck(true);
  const durationAt = raw
    .prepare<Window & { offset: number }, number>(
      `select end_time - start_time as d from runs where ${IN_RUNS} and ${ENDED} order by d limit 1 offset :offset`,
    )
    .pluck(true);
  const top = (column: "agent_id" | "trigger_id") =>
    raw.prepare<Window & { top: number }, FailingRecord>(
      `select ${column} as id, sum(${FAILED}) as failures, count(*) as runs
       from runs where ${IN_RUNS} and ${column} is not null
       group by ${column} having sum(${FAILED}) > 0
       order by failures desc, id limit :top`,
    );
  const agents = top("agent_id");
  const triggers = top("trigger_id");
  const words = raw.prepare<Window, { status: "failed" | "timed_out"; word: string; n: number }>(
    `select status, case when status = 'failed' then leading_word(error) else '' end as word, count(*) as n
     from runs where ${IN_RUNS} and ${FAILED} group by 1, 2`,
  );
  const queued = raw.prepare<[string], { n: number; oldest: string | null }>(
    `select count(*) as n, min(id) as oldest from runs where tenant_id = ? and status = 'queued'`,
  );

  // Nearest rank: the smallest value with at least p of them at or below it.
  const rank = (p: number, n: number) => Math.max(0, Math.ceil(p * n) - 1);

  return {
    tenant: (tenantId: string, q: OverviewQuery): Promise<OverviewCounts> => run(() => {
      const end = q.start + q.buckets * q.bucketMs;
      const window = (kind: "run" | "evt"): Window => ({
        tenant: tenantId,
        lo: idFloor(kind, q.start - ID_MARGIN_MS),
        hi: idFloor(kind, end + ID_MARGIN_MS),
        start: q.start,
        end,
      });
      const runs = window("run");
      const n = ended.get(runs) ?? 0;
      const waiting = queued.get(tenantId);
      const counts: OverviewCounts = {
        events: new Array<number>(q.buckets).fill(0),
        runs: emptyRuns(q.buckets),
        durations: {
          count: n,
          p50Ms: n ? (durationAt.get({ ...runs, offset: rank(0.5, n) }) ?? 0) : 0,
          p95Ms: n ? (durationAt.get({ ...runs, offset: rank(0.95, n) }) ?? 0) : 0,
        },
        failingAgents: agents.all({ ...runs, top: q.top }),
        failingTriggers: triggers.all({ ...runs, top: q.top }),
        failureWords: words.all(runs).map((w) => ({ status: w.status, word: w.word, count: w.n })),
        queued: waiting?.n ?? 0,
      };
      for (const e of events.all({ ...window("evt"), bucket: q.bucketMs })) counts.events[e.bucket] = e.n;
      for (const b of buckets.all({ ...runs, bucket: q.bucketMs })) counts.runs[b.status][b.bucket] = b.n;
      if (waiting?.oldest) counts.oldestQueuedTime = idTime(waiting.oldest);
      return counts;
    }),
  };
}
