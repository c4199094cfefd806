// The tenant overview on PostgreSQL: one aggregate query per figure, all on
// the pool at once. Each reads the window's runs or events through the
// tenant's (tenant_id, id) index by an id range (UUIDv7 ids sort by creation
// time), so the plan does not depend on statistics, and sums there: only the
// buckets, percentiles and top records come back.
import { idFloor, idTime } from "../../lib/ids.js";
import { ID_MARGIN_MS, emptyRuns, type FailingRecord, type OverviewCounts, type OverviewQuery, type OverviewStore } from "../overview.js";
import type { RunStatus } from "../types.js";
import { within } from "./deadline.js";
import { pg } from "./errors.js";
import type { Sql } from "./open.js";

// runtime/error-kinds.ts's LEADING_KIND, in PostgreSQL's regex dialect.
const LEADING_WORD = String.raw`^(?:steps\[\d+\][^:]*: )?([a-z_]+)\y`;
const FAILED = `status in ('failed', 'timed_out')`;
const ENDED = `status in ('succeeded', 'failed', 'timed_out')`;

export function createPgOverview(sql: Sql, timeoutMs: number): OverviewStore {
  return {
    tenant: (tenantId: string, q: OverviewQuery): Promise<OverviewCounts> => pg(async () => {
      const end = q.start + q.buckets * q.bucketMs;
      // $1 tenant, $2/$3 id range, $4/$5 the window, $6 bucket width.
      const runWindow = [tenantId, idFloor("run", q.start - ID_MARGIN_MS), idFloor("run", end + ID_MARGIN_MS), q.start, end];
      const inRuns = `tenant_id = $1 and id >= $2 and id < $3 and create_time >= $4 and create_time < $5`;
      const run = <T extends object[]>(text: string, extra: unknown[] = []) =>
        within(sql.unsafe<T>(text, [...runWindow, ...extra] as never[], { prepare: true }), timeoutMs);
      const top = (column: "agent_id" | "trigger_id") =>
        run<FailingRecord[]>(
          `select ${column} as id, count(*) filter (where ${FAILED})::int as failures, count(*)::int as runs
           from runs where ${inRuns} and ${column} is not null
           group by ${column} having count(*) filter (where ${FAILED}) > 0
           order by failures desc, id limit $6`,
          [q.top],
        );
      const [events, buckets, durations, agents, triggers, words, queued] = await Promise.all([
        within(
          sql.unsafe<{ bucket: number; n: number }[]>(
            `select ((receive_time - $4) / $6)::int as bucket, count(*)::int as n from events
             where tenant_id = $1 and id >= $2 and id < $3 and receive_time >= $4 and receive_time < $5 group by 1`,
            [tenantId, idFloor("evt", q.start - ID_MARGIN_MS), idFloor("evt", end + ID_MARGIN_MS), q.start, end, q.bucketMs],
            { prepare: true },
          ),
          timeoutMs,
        ),
        run<{ bucket: number; status: RunStatus; n: number }[]>(
          `select ((create_time - $4) / $6)::int as bucket, status, count(*)::int as n from runs where ${inRuns} group by 1, 2`,
          [q.bucketMs],
        ),
        run<{ n: number; p: number[] | null }[]>(
          `select count(*)::int as n,
             percentile_disc(array[0.5, 0.95]) within group (order by (end_time - start_time)::float8) as p
           from runs where ${inRuns} and ${ENDED} and start_time is not null and end_time is not null`,
        ),
        top("agent_id"),
        top("trigger_id"),
        run<{ status: "failed" | "timed_out"; word: string; n: number }[]>(
          `select status, case when status = 'failed' then coalesce(substring(error from '${LEADING_WORD}'), '') else '' end as word,
             count(*)::int as n
           from runs where ${inRuns} and ${FAILED} group by 1, 2`,
        ),
        within(
          sql<{ n: number; oldest: string | null }[]>`select count(*)::int as n, min(id) as oldest from runs
            where tenant_id = ${tenantId} and status = 'queued'`,
          timeoutMs,
        ),
      ]);
      const counts: OverviewCounts = {
        events: new Array<number>(q.buckets).fill(0),
        runs: emptyRuns(q.buckets),
        durations: { count: durations[0]?.n ?? 0, p50Ms: durations[0]?.p?.[0] ?? 0, p95Ms: durations[0]?.p?.[1] ?? 0 },
        failingAgents: [...agents],
        failingTriggers: [...triggers],
        failureWords: words.map((w) => ({ status: w.status, word: w.word, count: w.n })),
        queued: queued[0]?.n ?? 0,
      };
      for (const e of events) counts.events[e.bucket] = e.n;
      for (const b of buckets) counts.runs[b.status][b.bucket] = b.n;
      if (queued[0]?.oldest) counts.oldestQueuedTime = idTime(queued[0].oldest);
      return counts;
    }),
  };
}
