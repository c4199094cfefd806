// The tenant overview on SQLite: the groups PostgreSQL makes in one pass
// (store/postgres/overview.ts), one prepared statement each, over the
// window's rows found a status at a time (./overview-rows.ts); folded the same
// way (`foldGroups`). The slots sealed already are read from their rollups
// instead (./overview-rollups.ts), the rest as ever.
import type Database from "better-sqlite3";
import { idFloor, idTime } from "../../lib/ids.js";
import {
  DURATION_KEY,
  FAILED_RUN,
  ID_MARGIN_MS,
  LEADING_WORD,
  TIMED_RUN,
  foldGroups,
  fromRollups,
  readWindow,
  type OverviewCounts,
  type OverviewQuery,
  type OverviewStore,
  type RunGroup,
} from "../overview.js";
import { run } from "./errors.js";
import { createSqliteRollups } from "./overview-rollups.js";
import { RUNS_IN_RANGE } from "./overview-rows.js";
import { QUEUED_COUNT } from "./queue.js";


// [start, end) of a window whose buckets count from `origin`.
interface Window {
  tenant: string;
  lo: string;
  hi: string;
  start: number;
  end: number;
  origin: number;
  bucket: number;
}

export function createSqliteOverview(raw: Database.Database): OverviewStore {
  raw.function("leading_word", { deterministic: true }, (error: unknown) =>
    typeof error === "string" ? (LEADING_WORD.exec(error)?.[1] ?? "") : "",
  );
  const groups = (select: string, where = "") => raw.prepare<Window, RunGroup>(`${select} from ${RUNS_IN_RANGE} ${where}`);
  const statements = [
    groups(`select 'bucket' as "set", (create_time - cast(:origin as integer)) / cast(:bucket as integer) as bucket, status, count(*) as n`, "group by 2, 3"),
    groups(`select 'agent' as "set", agent_id as id, count(*) as n, sum(${FAILED_RUN}) as failures`, "group by agent_id"),
    groups(`select 'trigger' as "set", trigger_id as id, count(*) as n, sum(${FAILED_RUN}) as failures`, "where trigger_id is not null group by trigger_id"),
    groups(
      `select 'word' as "set", status, case when status = 'failed' then leading_word(error) else '' end as word, count(*) as n`,
      `where ${FAILED_RUN} group by 2, 3`,
    ),
    groups(`select 'duration' as "set", ${DURATION_KEY("(end_time - start_time)")} as ms, count(*) as n`, `where ${TIMED_RUN} group by 2`),
  ];
  const events = raw.prepare<Window, { bucket: number; n: number }>(
    `select (receive_time - cast(:origin as integer)) / cast(:bucket as integer) as bucket, count(*) as n from events
     where tenant_id = :tenant and id >= :lo and id < :hi and receive_time >= :start and receive_time < :end group by 1`,
  );
  // The tenant's queued runs now: their count as the quota reads it (where
  // counting the runs read every queued one) and the oldest, the first entry
  // of runs_queued.
  const queued = raw.prepare<[string, string], { n: number; oldest: string | null }>(
    `select (${QUEUED_COUNT}) as n,
       (select id from runs indexed by runs_queued where tenant_id = ? and status = 'queued' order by id limit 1) as oldest`,
  );

  const rollups = createSqliteRollups(raw);
  // The live groups and events of [from, to) of the window.
  const live = (tenantId: string, q: OverviewQuery, from: number, to: number) => {
    const window = (kind: "run" | "evt"): Window => ({
      tenant: tenantId,
      lo: idFloor(kind, from - ID_MARGIN_MS),
      hi: idFloor(kind, to + ID_MARGIN_MS),
      start: from,
      end: to,
      origin: q.start,
      bucket: q.bucketMs,
    });
    const runs = window("run");
    return { groups: statements.flatMap((s) => s.all(runs)), events: events.all(window("evt")) };
  };

  return {
    tenant: (tenantId: string, q: OverviewQuery): Promise<OverviewCounts> =>
      run(() => {
        const parts = readWindow(q, rollups.watermark(tenantId));
        const answers = [
          ...(parts.rolled ? [fromRollups(rollups.read(tenantId, parts.rolled.from, parts.rolled.to, q.start, q.bucketMs))] : []),
          ...parts.live.map((r) => live(tenantId, q, r.from, r.to)),
        ];
        const waiting = queued.get(tenantId, tenantId);
        return foldGroups(q, answers.flatMap((a) => a.groups), answers.flatMap((a) => a.events), {
          n: waiting?.n ?? 0,
          oldestTime: waiting?.oldest ? idTime(waiting.oldest) : undefined,
        });
      }),
    unsealed: (now) => run(() => rollups.unsealed(now)),
    seal: (tenantId, now) => run(() => rollups.seal(tenantId, now)),
  };
}
