import type { TriggerRow } from "./rows.js";
import type { ScheduledTrigger } from "./store.js";

// A schedule trigger as both engines read it (its latest slot's time, null
// when it has none) as the contract has it: without a lastSlot then.
export function withLastSlot({ lastSlot, ...trigger }: TriggerRow & { lastSlot: number | null }): ScheduledTrigger {
  return lastSlot === null ? trigger : { ...trigger, lastSlot };
}
