import type { RunInsert, TriggerRow } from "../rows.js";
import { pg } from "./errors.js";
import type { Sql } from "./open.js";
import { tableReader } from "./repos.js";
import { holdQueuedCounts, queueRuns } from "./runs.js";
import * as schema from "./schema.js";
import { withLastSlot } from "../scheduled-trigger.js";
import type { ScheduleStore } from "../store.js";

export function createPgScheduleStore(sql: Sql): ScheduleStore {
  const t = tableReader(schema.triggers);
  // By triggers_schedule, whose condition `kind = 'schedule'` implies; each
  // latest slot from the end of the slots' primary key.
  const triggers = `select ${t.columns},
      (select max(s.slot_time) from schedule_slots s where s.trigger_id = ${t.col(schema.triggers.id)}) as "lastSlot"
    from ${t.table} join agents a on a.id = ${t.col(schema.triggers.agentId)}
    where ${t.col(schema.triggers.kind)} = 'schedule' and ${t.col(schema.triggers.enabled)} and a.enabled`;
  return {
    scheduleTriggers: () =>
      pg(async () => (await sql.unsafe<(TriggerRow & { lastSlot: number | null })[]>(triggers, [], { prepare: true })).map(withLastSlot)),
    // The slot's primary key decides which replica fires it: the insert that
    // stored nothing lost. The quota is counted holding the tenant's count.
    fireSlot: (triggerId, slotTime, run: RunInsert, maxQueued = Infinity) =>
      pg(() =>
        sql.begin(async (tx) => {
          const taken = await tx`insert into schedule_slots (trigger_id, slot_time, run_id) values (${triggerId}, ${slotTime}, ${run.id})
            on conflict do nothing returning 1`;
          if (!taken.length) return "taken" as const;
          if (maxQueued !== Infinity) {
            const counts = await holdQueuedCounts(tx, [run.tenantId]);
            // A skipped slot is recorded with an empty run id, so it is not fired later.
            if (counts.get(run.tenantId)! >= maxQueued) {
              await tx`update schedule_slots set run_id = '' where trigger_id = ${triggerId} and slot_time = ${slotTime}`;
              return "over_quota" as const;
            }
          }
          await queueRuns(tx, [run]);
          return "fired" as const;
        }),
      ),
  };
}
