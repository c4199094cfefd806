import { newId } from "../lib/ids.js";
import type { RunInsert } from "./rows.js";

// What the creator of a run decides; the rest is what every run starts with.
export type QueuedRunFields = Pick<RunInsert, "tenantId" | "agentId" | "triggerId" | "eventId" | "input" | "traceParent">;

// A new run, queued at `now`.
export const queuedRun = (fields: QueuedRunFields, now: number): RunInsert => ({
  id: newId("run"),
  ...fields,
  status: "queued",
  steps: [],
  createTime: now,
  updateTime: now,
});
