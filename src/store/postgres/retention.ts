import { slotFloor } from "../overview.js";
import { RUN_ENDED } from "../run-conditions.js";
import type { PruneResult, RetentionStore } from "../store.js";
import type { Sql } from "./open.js";
import { pg } from "./errors.js";

// Any fixed 64-bit key (next to the migrations' one): one replica prunes at
// a time; the others find it held and skip their round.
const PRUNE_LOCK = 7_104_519_233_002;

// One batch is one transaction under a transaction-level advisory lock.
// Deletes take row locks only (SKIP LOCKED: a row some writer holds waits
// for the next batch), so ingest and claims go on meanwhile.
export function createPgRetention(sql: Sql): RetentionStore {
  const prune = (before: number, batch: number) =>
    sql.begin(async (tx): Promise<PruneResult | undefined> => {
      const [lock] = await tx<{ locked: boolean }[]>`select pg_try_advisory_xact_lock(${PRUNE_LOCK}::int8) as locked`;
      if (!lock?.locked) return undefined;
      const runs = await tx`
        delete from runs where id in (
          select id from runs where end_time < ${before}::int8 and ${sql.unsafe(RUN_ENDED)}
          order by end_time limit ${batch}::int4 for update skip locked)`;
      // An event goes once no run of it is left: a queued or running run keeps it.
      // The comparison is in runs.event_id's collation, so that runs_event
      // answers it: events.id is "C", which would otherwise win, and a
      // comparison in another collation than an index's cannot use it (the
      // batch then joined every event to every run: 210 ms at 150,000).
      const events = await tx`
        delete from events where id in (
          select e.id from events e
          where e.receive_time < ${before}::int8 and not exists (select 1 from runs r where r.event_id = e.id collate "default")
          order by e.receive_time limit ${batch}::int4 for update skip locked)`;
      // Each trigger's latest slot stays however old: the scheduler fires a
      // slot only when it is later than that one.
      const slots = await tx`
        delete from schedule_slots where (trigger_id, slot_time) in (
          select s.trigger_id, s.slot_time from schedule_slots s
          where s.slot_time < ${before}::int8 and s.slot_time < (select max(m.slot_time) from schedule_slots m where m.trigger_id = s.trigger_id)
          order by s.slot_time limit ${batch}::int4 for update skip locked)`;
      // A bucket untouched that long is full again: deleting it changes nothing.
      const buckets = await tx`
        delete from rate_limit_buckets where key in (
          select key from rate_limit_buckets where refill_time < ${before}::int8 limit ${batch}::int4 for update skip locked)`;
      // The sealed range first: no overview reads the rows deleted after it.
      const cut = slotFloor(before);
      await tx`update overview_watermarks set sealed_from = ${cut}::int8, sealed_until = greatest(sealed_until, ${cut}::int8) where sealed_from < ${cut}::int8`;
      const rollups = await tx`
        delete from overview_rollups where (tenant_id, slot, kind, status, key) in (
          select tenant_id, slot, kind, status, key from overview_rollups where slot < ${cut}::int8 limit ${batch}::int4)`;
      return { runs: runs.count, events: events.count, slots: slots.count, buckets: buckets.count, rollups: rollups.count };
    });
  return { prune: (before, batch) => pg(() => prune(before, batch)) };
}
