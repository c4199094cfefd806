// The overview's sealed rollups on SQLite (store/overview.ts says what and
// why): a pass seals a tenant's slots with the live query's groups
// (./overview.ts), each also grouped by slot, in one immediate transaction,
// whose write lock keeps a second process from sealing meanwhile; the
// watermark is read inside it. The overview reads the rows back summed per
// group. `leading_word` must be registered first (./overview.ts does).
import type Database from "better-sqlite3";
import { idFloor } from "../../lib/ids.js";
import { DURATION_KEY, FAILED_RUN, ID_MARGIN_MS, SLOT_MS, TIMED_RUN, firstWatermark, sealLimit, sealUntil, type RollupRow, type Watermark } from "../overview.js";
import { withLockWait } from "./lock-wait.js";
import { RUNS_IN_RANGE } from "./overview-rows.js";

// How long a pass waits for the write lock before leaving it to the next one.
const LOCK_WAIT_MS = 250;

const SLOT = (t: string) => `cast(:start as integer) + (${t} - cast(:start as integer)) / ${SLOT_MS} * ${SLOT_MS}`;

interface Range {
  tenant: string;
  lo: string;
  hi: string;
  start: number;
  end: number;
}

export function createSqliteRollups(raw: Database.Database) {
  const into = (select: string, where = "") =>
    raw.prepare<Range>(
      `insert into overview_rollups (tenant_id, slot, kind, status, key, n, failures) select :tenant, ${SLOT("create_time")}, ${select} from ${RUNS_IN_RANGE} ${where}`,
    );
  const seals = [
    into(`'bucket', status, '', count(*), 0`, "group by 2, 4"),
    into(`'agent', '', agent_id, count(*), sum(${FAILED_RUN})`, "group by 2, agent_id"),
    into(`'trigger', '', trigger_id, count(*), sum(${FAILED_RUN})`, "where trigger_id is not null group by 2, trigger_id"),
    into(`'word', status, case when status = 'failed' then leading_word(error) else '' end, count(*), 0`, `where ${FAILED_RUN} group by 2, 4, 5`),
    into(`'duration', '', ${DURATION_KEY("(end_time - start_time)")}, count(*), 0`, `where ${TIMED_RUN} group by 2, 5`),
    raw.prepare<Range>(
      `insert into overview_rollups (tenant_id, slot, kind, status, key, n, failures)
       select :tenant, ${SLOT("receive_time")}, 'events', '', '', count(*), 0 from events
       where tenant_id = :tenant and id >= :lo and id < :hi and receive_time >= :start and receive_time < :end group by 2`,
    ),
  ];
  const start = raw.prepare<[string, number, number]>(`insert into overview_watermarks (tenant_id, sealed_from, sealed_until) values (?, ?, ?) on conflict do nothing`);
  const watermark = raw.prepare<[string], Watermark>(`select sealed_from as sealedFrom, sealed_until as sealedUntil from overview_watermarks where tenant_id = ?`);
  // Queued and running runs are few, each status on a partial index of its
  // own (runs_queued, runs_running), each named in its index's words.
  const oldestOpen = raw.prepare<{ tenant: string; lo: string; from: number }, { t: number | null }>(
    `select min(t) as t from (
       select min(create_time) as t from runs where tenant_id = :tenant and status = 'queued' and id >= :lo and create_time >= :from
       union all
       select min(create_time) from runs
       where tenant_id = :tenant and status = 'running' and id >= :lo and create_time >= :from)`,
  );
  const advance = raw.prepare<[number, string]>(`update overview_watermarks set sealed_until = ? where tenant_id = ?`);
  const seal = raw.transaction((tenantId: string, now: number): number => {
    const first = firstWatermark(now);
    start.run(tenantId, first.sealedFrom, first.sealedUntil);
    const w = watermark.get(tenantId)!;
    const from = w.sealedUntil;
    if (from >= sealLimit(now)) return 0;
    const until = sealUntil(w, now, oldestOpen.get({ tenant: tenantId, lo: idFloor("run", from - ID_MARGIN_MS), from })?.t ?? undefined);
    if (until === from) return 0;
    for (const [i, s] of seals.entries()) {
      const kind = i === seals.length - 1 ? "evt" : "run";
      s.run({ tenant: tenantId, lo: idFloor(kind, from - ID_MARGIN_MS), hi: idFloor(kind, until + ID_MARGIN_MS), start: from, end: until });
    }
    advance.run(until, tenantId);
    return (until - from) / SLOT_MS;
  });
  const unsealed = raw.prepare<[number], string>(
    `select t.id from tenants t where not exists (select 1 from overview_watermarks w where w.tenant_id = t.id and w.sealed_until >= ?)`,
  );
  const read = raw.prepare<{ tenant: string; from: number; to: number; start: number; bucket: number }, RollupRow>(
    `select kind, status, key, case when kind in ('bucket', 'events') then (slot - cast(:start as integer)) / cast(:bucket as integer) end as bucket,
       sum(n) as n, sum(failures) as failures
     from overview_rollups where tenant_id = :tenant and slot >= :from and slot < :to group by 1, 2, 3, 4`,
  );

  return {
    seal: (tenantId: string, now: number) => withLockWait(raw, LOCK_WAIT_MS, () => seal.immediate(tenantId, now)) ?? 0,
    unsealed: (now: number) => unsealed.pluck().all(sealLimit(now)),
    watermark: (tenantId: string) => watermark.get(tenantId),
    // The rows of slots [from, to), summed per group, buckets counted from `start`.
    read: (tenantId: string, from: number, to: number, start: number, bucketMs: number) =>
      read.all({ tenant: tenantId, from, to, start, bucket: bucketMs }),
  };
}
