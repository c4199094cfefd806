import type { RunInsert, TriggerRow } from "../rows.js";
import { pg } from "./errors.js";
import type { Sql } from "./open.js";
import { tableReader } from "./repos.js";
import { holdQueuedCounts, queueRuns } from "./runs.js";
import * as schema from "./schema.js";
import type { ScheduleStore } from "../store.js";

export function createPgScheduleStore(sql: Sql): ScheduleStore {
  const t = tableReader(schema.triggers);
  const triggers = `${t.select} join agents a on a.id = ${t.col(schema.triggers.agentId)}
    where ${t.col(schema.triggers.kind)} = 'schedule' and ${t.col(schema.triggers.enabled)} and a.enabled`;
  return {
    scheduleTriggers: () => pg(async () => [...(await sql.unsafe<TriggerRow[]>(triggers, [], { prepare: true }))]),
    lastSlot: (triggerId) =>
      pg(async () => {
        const [row] = await sql<[{ t: number | null }]>`select max(slot_time) as t from schedule_slots where trigger_id = ${triggerId}`;
        return row.t ?? undefined;
      }),
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
