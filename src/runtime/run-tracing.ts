// The spans of a run's execution. A run's span is a child of the span that
// queued it (the webhook's ingest span, or the API call of RunAgent and
// ReplayEvent), whose context is stored with the run: one trace from the
// event's receipt to each tool and model call, whichever replica or thread
// executes it and however long it waited. A run queued by a schedule starts
// its own trace.
import { SpanKind, trace, type Attributes } from "@opentelemetry/api";
import { ATTR, contextOf, errorKind, failed, inSpan } from "../lib/tracing.js";
import type { RunRow } from "../store/rows.js";
import type { ExecutionResult } from "./executor.js";

export function traceRun(run: RunRow, execute: () => Promise<void>): Promise<void> {
  const attributes: Attributes = { [ATTR.tenant]: run.tenantId, [ATTR.run]: run.id, [ATTR.agent]: run.agentId, [ATTR.attempt]: run.attempt };
  if (run.triggerId) attributes[ATTR.trigger] = run.triggerId;
  if (run.eventId) attributes[ATTR.event] = run.eventId;
  return inSpan("execute run", { kind: SpanKind.CONSUMER, attributes }, execute, undefined, contextOf(run.traceParent));
}

// The attempt's outcome on the run's span (current while it executes).
export function traceOutcome(result: ExecutionResult): void {
  const span = trace.getActiveSpan();
  if (!span) return;
  span.setAttribute(ATTR.status, result.status);
  if (result.status !== "succeeded") failed(span, result.status === "timed_out" ? "timed_out" : errorKind(result.error));
}

// A step's span, current for its calls (each try a span of its own), failed
// with the kind of the error it throws or returns (`errorOf`). `index` is
// the plan step, or the model turn of a model loop.
export function traceStep<T>(
  kind: "tool_call" | "model_call",
  index: number,
  attributes: Attributes,
  call: () => Promise<T>,
  errorOf: (outcome: T) => string = () => "",
): Promise<T> {
  return inSpan(`step ${kind}`, { attributes: { [ATTR.stepKind]: kind, [ATTR.step]: index, ...attributes } }, async (span) => {
    const outcome = await call();
    const error = errorOf(outcome);
    if (error) failed(span, errorKind(error));
    return outcome;
  });
}
