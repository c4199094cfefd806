import type { RunRow } from "../../rows.js";
import type { ClaimedRun } from "../../store.js";

// A run as PostgreSQL returns it (columns by name).
export interface PgRun {
  id: string;
  tenant_id: string;
  agent_id: string;
  trigger_id: string | null;
  event_id: string | null;
  input: unknown;
  status: RunRow["status"];
  attempt: number;
  steps: RunRow["steps"];
  output: unknown;
  error: string;
  start_time: number | null;
  end_time: number | null;
  lease_owner: string | null;
  lease_expire_time: number | null;
  trace_parent: string | null;
  create_time: number;
  update_time: number;
}

export const toRow = (r: PgRun): RunRow => ({
  id: r.id,
  tenantId: r.tenant_id,
  agentId: r.agent_id,
  triggerId: r.trigger_id,
  eventId: r.event_id,
  input: r.input,
  status: r.status,
  attempt: r.attempt,
  steps: r.steps,
  output: r.output,
  error: r.error,
  startTime: r.start_time,
  endTime: r.end_time,
  leaseOwner: r.lease_owner,
  leaseExpireTime: r.lease_expire_time,
  traceParent: r.trace_parent,
  createTime: r.create_time,
  updateTime: r.update_time,
});

// A run a claim took, as TAKEN_JSON returns it: its columns, its agent's
// update time and its event's fields (ClaimContext).
export interface PgClaimed extends PgRun {
  agent_update_time: number | null;
  event: { id: string; event_type: string; payload: Record<string, unknown>; source_id: string; receive_time: number } | null;
}

export const toClaimed = (r: PgClaimed): ClaimedRun => ({
  ...toRow(r),
  context: {
    agentUpdateTime: r.agent_update_time,
    event: r.event && { id: r.event.id, eventType: r.event.event_type, payload: r.event.payload, sourceId: r.event.source_id, receiveTime: r.event.receive_time },
  },
});
