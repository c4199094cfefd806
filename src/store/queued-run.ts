import { newIdAt } from "../lib/ids.js";
import type { RunInsert } from "./rows.js";

// What the creator of a run decides; the rest is what every run starts with.
export type QueuedRunFields = Pick<RunInsert, "tenantId" | "agentId" | "triggerId" | "eventId" | "input" | "traceParent">;

// A new run, queued at `now`, its id made at `now` too (see newIdAt).
export const queuedRun = (fields: QueuedRunFields, now: number): RunInsert => ({
  id: newIdAt("run", now),
  ...fields,
  status: "queued",
  steps: [],
  createTime: now,
  updateTime: now,
});
