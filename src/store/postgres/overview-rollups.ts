// The overview's sealed rollups on PostgreSQL (store/overview.ts says what
// and why): a pass seals a tenant's slots with the live query's own row
// shape (RUN_ROWS), grouped per slot, in one transaction that holds the
// tenant's watermark row, so that two replicas sealing it at once seal each
// slot once (the second waits, then starts from the watermark the first
// moved). The overview reads the rows back summed per group.
import { idFloor } from "../../lib/ids.js";
import { FAILED_RUN, ID_MARGIN_MS, SLOT_MS, firstWatermark, sealLimit, sealUntil, type RollupRow, type Watermark } from "../overview.js";
import { within } from "./deadline.js";
import type { Sql } from "./open.js";
import { RUN_ROWS } from "./overview-rows.js";

// The RunGroup sets of the live query, each with the slot ($6 + bucket × $7):
// a column left out of a set reads null, so the set's own column is the key.
const SEAL_RUNS = `
  insert into overview_rollups (tenant_id, slot, kind, status, key, n, failures)
  select $1, $6 + bucket * $7, kind, coalesce(status, ''), coalesce(key, ''), n, failures from (
    select bucket, status, coalesce(agent_id, trigger_id, word, d::int8::text) as key,
      case when grouping(agent_id) = 0 then 'agent' when grouping(trigger_id) = 0 then 'trigger'
        when grouping(word) = 0 then 'word' when grouping(d) = 0 then 'duration' else 'bucket' end as kind,
      count(*)::int as n, count(*) filter (where ${FAILED_RUN})::int as failures
    from (${RUN_ROWS}) r
    group by grouping sets ((bucket, status), (bucket, agent_id), (bucket, trigger_id), (bucket, status, word), (bucket, d))
  ) g
  where kind in ('bucket', 'agent') or key is not null`;

const SEAL_EVENTS = `
  insert into overview_rollups (tenant_id, slot, kind, status, key, n, failures)
  select $1, $4 + (receive_time - $4) / $6 * $6 as slot, 'events', '', '', count(*)::int, 0 from events
  where tenant_id = $1 and id >= $2 and id < $3 and receive_time >= $4 and receive_time < $5 group by 2`;

// $1 tenant, $2/$3 slots, $4 the window's start, $5 bucket width.
const READ = `
  select kind, status, key, case when kind in ('bucket', 'events') then ((slot - $4) / $5)::int end as bucket,
    sum(n)::int as n, sum(failures)::int as failures
  from overview_rollups where tenant_id = $1 and slot >= $2 and slot < $3 group by 1, 2, 3, 4`;

export function createPgRollups(sql: Sql, timeoutMs: number) {
  const seal = (tenantId: string, now: number) =>
    sql.begin(async (tx) => {
      const first = firstWatermark(now);
      await tx`insert into overview_watermarks (tenant_id, sealed_from, sealed_until)
        values (${tenantId}, ${first.sealedFrom}, ${first.sealedUntil}) on conflict do nothing`;
      const [w] = await tx<Watermark[]>`select sealed_from as "sealedFrom", sealed_until as "sealedUntil"
        from overview_watermarks where tenant_id = ${tenantId} for update`;
      const from = w!.sealedUntil;
      if (from >= sealLimit(now)) return 0;
      // Queued and running runs are few, each status on a partial index of
      // its own (runs_queued, runs_running), each named in its index's words.
      const lo = idFloor("run", from - ID_MARGIN_MS);
      const [open] = await tx<{ t: number | null }[]>`select min(t) as t from (
          select min(create_time) as t from runs
          where tenant_id = ${tenantId} and status = 'queued' and id >= ${lo} and create_time >= ${from}
          union all
          select min(create_time) from runs
          where tenant_id = ${tenantId} and status = 'running' and id >= ${lo} and create_time >= ${from}) o`;
      const until = sealUntil(w!, now, open?.t ?? undefined);
      if (until === from) return 0;
      await tx`set local enable_sort = off`;
      await tx`set local work_mem = '32MB'`;
      const runs = [tenantId, idFloor("run", from - ID_MARGIN_MS), idFloor("run", until + ID_MARGIN_MS), from, until, from, SLOT_MS];
      await tx.unsafe(SEAL_RUNS, runs, { prepare: true });
      const events = [tenantId, idFloor("evt", from - ID_MARGIN_MS), idFloor("evt", until + ID_MARGIN_MS), from, until, SLOT_MS];
      await tx.unsafe(SEAL_EVENTS, events, { prepare: true });
      await tx`update overview_watermarks set sealed_until = ${until} where tenant_id = ${tenantId}`;
      return (until - from) / SLOT_MS;
    });

  return {
    seal,
    unsealed: async (now: number) =>
      (
        await sql<{ id: string }[]>`select t.id from tenants t where not exists (
          select 1 from overview_watermarks w where w.tenant_id = t.id and w.sealed_until >= ${sealLimit(now)})`
      ).map((r) => r.id),
    watermark: async (tenantId: string) =>
      (
        await within(
          sql<Watermark[]>`select sealed_from as "sealedFrom", sealed_until as "sealedUntil" from overview_watermarks where tenant_id = ${tenantId}`,
          timeoutMs,
        )
      )[0],
    // The rows of slots [from, to), summed per group, buckets counted from `start`.
    read: (tenantId: string, from: number, to: number, start: number, bucketMs: number) =>
      sql.begin(async (tx) => {
        await tx`set local enable_sort = off`;
        return within(tx.unsafe<RollupRow[]>(READ, [tenantId, from, to, start, bucketMs], { prepare: true }), timeoutMs);
      }),
  };
}
