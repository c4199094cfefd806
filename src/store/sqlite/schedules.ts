import type Database from "better-sqlite3";
import { run } from "./errors.js";
import { prepareQueuedCount, prepareRunInsert } from "./queue.js";
import type { TriggerRow } from "../rows.js";
import type { ScheduleStore } from "../store.js";
import { withLastSlot } from "../scheduled-trigger.js";

export function createSqliteScheduleStore(raw: Database.Database): ScheduleStore {
  // By triggers_schedule, whose condition `kind = 'schedule'` implies (its
  // cost: test/queue-cost.test.ts); each latest slot from the end of the
  // slots' primary key.
  const triggers = raw.prepare<[], TriggerRow & { lastSlot: number | null }>(
    `select t.id, t.tenant_id as tenantId, t.agent_id as agentId, t.enabled, t.kind, t.source_id as sourceId,
       t.event_type_pattern as eventTypePattern, t.filter, t.cron, t.timezone, t.filter_error as filterError,
       t.filter_error_time as filterErrorTime, t.create_time as createTime, t.update_time as updateTime,
       (select max(s.slot_time) from schedule_slots s where s.trigger_id = t.id) as lastSlot
     from triggers t join agents a on a.id = t.agent_id
     where t.kind = 'schedule' and t.enabled = 1 and a.enabled = 1`,
  );
  const slot = raw.prepare(`insert into schedule_slots (trigger_id, slot_time, run_id) values (?, ?, ?) on conflict do nothing`);
  const insertRun = prepareRunInsert(raw);
  const queued = prepareQueuedCount(raw);
  const fire = raw.transaction((triggerId: string, slotTime: number, r: Parameters<ScheduleStore["fireSlot"]>[2], maxQueued: number) => {
    // A skipped slot is recorded with an empty run id, so it is not fired later.
    const over = queued.get(r.tenantId)! >= maxQueued;
    if (slot.run(triggerId, slotTime, over ? "" : r.id).changes === 0) return "taken" as const;
    if (over) return "over_quota" as const;
    insertRun.run(r);
    return "fired" as const;
  });
  return {
    scheduleTriggers: () => run(() => triggers.all().map((t) => withLastSlot({ ...t, enabled: Boolean(t.enabled) }))),
    fireSlot: (triggerId, slotTime, r, maxQueued = Infinity) => run(() => fire.immediate(triggerId, slotTime, r, maxQueued)),
  };
}
