import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, durationFromMs, timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { RunSchema, RunStatus, StepKind, StepStatus, type Run } from "../../gen/platform/v1/run_pb.js";
import type { RunRow, RunStatus as RunStatusName, RunStepRecord } from "../store/rows.js";
import { failedPrecondition, notFound } from "./errors.js";
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

// A step recorded `running` is so only while its attempt of the run is the
// one going on: a step left open by a worker that died failed; one left open
// in the last attempt of a run cancelled around it was cancelled (the worker
// no longer holds the run, so it writes nothing after the cancel). Records
// made before steps were recorded at their start carry no status: they were
// written when they ended.
function stepStatus(s: RunStepRecord, run: RunRow): StepStatus {
  if (s.status === "succeeded") return StepStatus.SUCCEEDED;
  if (s.status === "failed") return StepStatus.FAILED;
  if (s.endTime === undefined) {
    const lastAttempt = (s.attempt ?? run.attempt) === run.attempt;
    if (lastAttempt && run.status === "running") return StepStatus.RUNNING;
    return lastAttempt && run.status === "cancelled" ? StepStatus.CANCELLED : StepStatus.FAILED;
  }
  return s.error ? StepStatus.FAILED : StepStatus.SUCCEEDED;
}

// Why a step that never ended has no outcome of its own.
function interruption(status: StepStatus, attempt: number): string {
  if (status === StepStatus.CANCELLED) return "cancelled: the run was cancelled while the step ran";
  return status === StepStatus.FAILED ? `interrupted: attempt ${attempt} of the run ended before the step did` : "";
}

export function runMessage(row: RunRow): Run {
  return create(RunSchema, {
    id: row.id,
    agentId: row.agentId,
    triggerId: row.triggerId ?? "",
    eventId: row.eventId ?? "",
    input: value(row.input),
    status: STATUS[row.status],
    attempt: row.attempt,
    steps: row.steps.map((s) => {
      const status = stepStatus(s, row);
      return {
        kind: s.kind === "tool_call" ? StepKind.TOOL_CALL : StepKind.MODEL_CALL,
        skillId: s.skillId,
        tool: s.tool,
        arguments: value(s.arguments),
        result: value(s.result),
        error: s.error || interruption(status, s.attempt ?? row.attempt),
        startTime: time(s.startTime),
        endTime: time(s.endTime),
        attempt: s.attempt ?? 0,
        worker: s.worker ?? "",
        status,
        duration: s.endTime === undefined ? undefined : durationFromMs(s.endTime - s.startTime),
        callAttempts: (s.callAttempts ?? []).map((a) => ({ startTime: time(a.startTime), endTime: time(a.endTime), error: a.error })),
        resumedFromAttempt: s.resumedFromAttempt ?? 0,
      };
    }),
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
          createdAfter: req.createTimeAfter && timestampMs(req.createTimeAfter),
          createdBefore: req.createTimeBefore && timestampMs(req.createTimeBefore),
        });
      const { items, nextPageToken } = page(rows, q.limit);
      return { runs: items.map((r) => ({ ...runMessage(r), tenant: tenant.slug })), nextPageToken };
    },
    async getRun({ id }, call) {
      const tenant = tenantOf(call);
      const row = await store.runs.get(tenant.id, id);
      if (!row) throw notFound("run", id);
      return { run: { ...runMessage(row), tenant: tenant.slug } };
    },
    async cancelRun({ id }, call) {
      const tenant = tenantOf(call);
      const cancelled = await store.queue.cancel(tenant.id, id, now());
      if (!cancelled) {
        const row = await store.runs.get(tenant.id, id);
        if (!row) throw notFound("run", id);
        throw failedPrecondition(`run "${id}" already ended (${row.status})`);
      }
      onRunCancelled(id);
      return { run: { ...runMessage(cancelled), tenant: tenant.slug } };
    },
  } satisfies Partial<PlatformHandlers>;
}
