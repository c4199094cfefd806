import type Database from "better-sqlite3";
import { slotFloor } from "../overview.js";
import { RUN_ENDED } from "../run-conditions.js";
import type { PruneResult, RetentionStore } from "../store.js";
import { run } from "./errors.js";
import { withLockWait } from "./lock-wait.js";

// How long a prune waits for the write lock before leaving it to the next
// round.
const LOCK_WAIT_MS = 250;

// One batch is one short immediate transaction: it holds the write lock,
// which also keeps a second process from pruning at the same time.
export function createSqliteRetention(raw: Database.Database): RetentionStore {
  const runs = raw.prepare(
    `delete from runs where id in (
       select id from runs where end_time < ? and ${RUN_ENDED}
       order by end_time limit ?)`,
  );
  // An event goes once no run of it is left: a queued or running run keeps it.
  const events = raw.prepare(
    `delete from events where id in (
       select e.id from events e where e.receive_time < ? and not exists (select 1 from runs r where r.event_id = e.id)
       order by e.receive_time limit ?)`,
  );
  // Each trigger's latest slot stays however old: the scheduler fires a slot
  // only when it is later than that one.
  const slots = raw.prepare(
    `delete from schedule_slots where rowid in (
       select s.rowid from schedule_slots s
       where s.slot_time < ? and s.slot_time < (select max(m.slot_time) from schedule_slots m where m.trigger_id = s.trigger_id)
       order by s.slot_time limit ?)`,
  );
  // A bucket untouched that long is full again: deleting it changes nothing.
  const buckets = raw.prepare(`delete from rate_limit_buckets where key in (select key from rate_limit_buckets where refill_time < ? limit ?)`);
  // The sealed range first: no overview reads the rows deleted after it.
  const sealedFrom = raw.prepare<{ cut: number }>(
    `update overview_watermarks set sealed_from = :cut, sealed_until = max(sealed_until, :cut) where sealed_from < :cut`,
  );
  const rollups = raw.prepare(`delete from overview_rollups where rowid in (select rowid from overview_rollups where slot < ? limit ?)`);
  const prune = raw.transaction((before: number, batch: number): PruneResult => {
    const pruned = {
      runs: runs.run(before, batch).changes,
      events: events.run(before, batch).changes,
      slots: slots.run(before, batch).changes,
      buckets: buckets.run(before, batch).changes,
    };
    sealedFrom.run({ cut: slotFloor(before) });
    return { ...pruned, rollups: rollups.run(slotFloor(before), batch).changes };
  });
  return {
    prune: (before, batch) => run(() => withLockWait(raw, LOCK_WAIT_MS, () => prune.immediate(before, batch))),
  };
}
