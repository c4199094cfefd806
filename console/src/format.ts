// How values of the API read on screen.
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema, type Duration, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import { RunStatus, StepStatus } from "../../gen/platform/v1/run_pb.js";

export function time(ts: Timestamp | undefined): string {
  return ts ? timestampDate(ts).toLocaleString() : "—";
}

export function millis(ts: Timestamp | undefined): number {
  return ts ? timestampDate(ts).getTime() : 0;
}

export function duration(d: Duration | undefined): string {
  if (!d) return "—";
  const ms = Number(d.seconds) * 1000 + Math.round(d.nanos / 1e6);
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

export const valueJson = (v: Value | undefined): JsonValue | undefined => (v ? toJson(ValueSchema, v) : undefined);
export const jsonValue = (v: JsonValue): Value => fromJson(ValueSchema, v);

export function pretty(v: JsonValue | undefined): string {
  return v === undefined ? "—" : JSON.stringify(v, null, 2);
}

// Enum names as the API's JSON spells them, lower case without the prefix:
// RUN_STATUS_SUCCEEDED → "succeeded".
export const runStatusName = (s: RunStatus) => (RunStatus[s] ?? "unspecified").toLowerCase().replace(/_/g, " ");
// Steps recorded before steps had a status were recorded once they ended.
// STEP_STATUS_CANCELLED: stopped by a cancel, not failed.
export const stepStatusName = (s: StepStatus, error: string) =>
  s === StepStatus.UNSPECIFIED ? (error ? "failed" : "succeeded") : (StepStatus[s] ?? "unspecified").toLowerCase();

export const RUN_STATUSES = [RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT];

export const isTerminal = (s: RunStatus) => s !== RunStatus.QUEUED && s !== RunStatus.RUNNING && s !== RunStatus.UNSPECIFIED;

export const durationMillis = (d: Duration | undefined) => (d ? Number(d.seconds) * 1000 + Math.round(d.nanos / 1e6) : 0);

export function millisText(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  return m < 60 ? `${m} min ${Math.round((ms % 60_000) / 1000)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

// "3 min ago", for a list; the exact time goes in its title.
export function ago(ts: Timestamp | undefined, now = Date.now()): string {
  if (!ts) return "—";
  const s = Math.round((now - millis(ts)) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}
