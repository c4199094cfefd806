import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { RunSchema, RunStatus, StepKind, type Run } from "../../gen/platform/v1/run_pb.js";
import type { RunRow, RunStatus as RunStatusName } from "../store/rows.js";
import { failedPrecondition, fromStoreError, notFound } from "./errors.js";
import { tenantOf, times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";

export const ENDED: ReadonlySet<RunStatusName> = new Set(["succeeded", "failed", "cancelled", "timed_out"]);

const STATUS: Record<RunStatusName, RunStatus> = {
  queued: RunStatus.QUEUED,
  running: RunStatus.RUNNING,
  succeeded: RunStatus.SUCCEEDED,
  failed: RunStatus.FAILED,
  cancelled: RunStatus.CANCELLED,
  timed_out: RunStatus.TIMED_OUT,
};
export const STATUS_NAME = new Map(Object.entries(STATUS).map(([name, value]) => [value, name as RunStatusName]));

const value = (v: unknown) => (v === undefined || v === null ? undefined : fromJson(ValueSchema, v as JsonValue));
const time = (ms: number | null | undefined) => (ms === null || ms === undefined ? undefined : timestampFromMs(ms));

export function runMessage(row: RunRow): Run {
  return create(RunSchema, {
    id: row.id,
    agentId: row.agentId,
    triggerId: row.triggerId ?? "",
    eventId: row.eventId ?? "",
    input: value(row.input),
    status: STATUS[row.status],
    attempt: row.attempt,
    steps: row.steps.map((s) => ({
      kind: s.kind === "tool_call" ? StepKind.TOOL_CALL : StepKind.MODEL_CALL,
      skillId: s.skillId,
      tool: s.tool,
      arguments: value(s.arguments),
      result: value(s.result),
      error: s.error,
      startTime: time(s.startTime),
      endTime: time(s.endTime),
      attempt: s.attempt ?? 0,
      worker: s.worker ?? "",
    })),
    output: value(row.output),
    error: row.error,
    startTime: time(row.startTime),
    endTime: time(row.endTime),
    ...times(row),
  });
}

export function runHandlers({ store, now, onRunCancelled }: ServiceDeps) {
  return {
    async listRuns(req, call) {
      const tenant = tenantOf(call);
      const q = pageQuery(req);
      const rows = await store.runs
        .list(tenant.id, {
          ...q,
          where: {
            agentId: req.agentId || undefined,
            triggerId: req.triggerId || undefined,
            eventId: req.eventId || undefined,
            status: STATUS_NAME.get(req.status),
          },
        })
        .catch(fromStoreError);
      const { items, nextPageToken } = page(rows, q.limit);
      return { runs: items.map((r) => ({ ...runMessage(r), tenant: tenant.slug })), nextPageToken };
    },
    async getRun({ id }, call) {
      const tenant = tenantOf(call);
      const row = await store.runs.get(tenant.id, id).catch(fromStoreError);
      if (!row) throw notFound("run", id);
      return { run: { ...runMessage(row), tenant: tenant.slug } };
    },
    async cancelRun({ id }, call) {
      const tenant = tenantOf(call);
      const cancelled = await store.queue.cancel(tenant.id, id, now()).catch(fromStoreError);
      if (!cancelled) {
        const row = await store.runs.get(tenant.id, id).catch(fromStoreError);
        if (!row) throw notFound("run", id);
        throw failedPrecondition(`run "${id}" already ended (${row.status})`);
      }
      onRunCancelled(id);
      return { run: { ...runMessage(cancelled), tenant: tenant.slug } };
    },
  } satisfies Partial<PlatformHandlers>;
}
