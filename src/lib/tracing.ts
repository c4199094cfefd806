// Spans at the service's own boundaries, through the OpenTelemetry API only.
// With no SDK registered (tracing off, the default) every call here is the
// API's no-op: no span is recorded, no context is kept and nothing is
// propagated. The SDK is started by the CLI (src/cli/tracing.ts) when the
// OTEL_* variables ask for it.
import { context, propagation, ROOT_CONTEXT, SpanStatusCode, trace, type Attributes, type Context, type Span, type SpanOptions } from "@opentelemetry/api";

// Attribute names. Ids only: never a payload, an argument, a result, an
// error message (it may quote a tool's answer) or a credential.
export const ATTR = {
  tenant: "agentplane.tenant.id",
  source: "agentplane.webhook_source.id",
  event: "agentplane.event.id",
  eventType: "agentplane.event.type",
  matched: "agentplane.event.matched_triggers",
  run: "agentplane.run.id",
  agent: "agentplane.agent.id",
  trigger: "agentplane.trigger.id",
  attempt: "agentplane.run.attempt",
  status: "agentplane.run.status",
  step: "agentplane.step.index",
  stepKind: "agentplane.step.kind",
  skill: "agentplane.skill.id",
  // OpenTelemetry semantic conventions (GenAI and MCP, errors).
  tool: "gen_ai.tool.name",
  errorType: "error.type",
} as const;

// Looked up on each use, not held: a tracer taken before the SDK is
// registered (or after it is shut down) must not stay the no-op (or live) one.
export const tracer = () => trace.getTracer("agentplane");

// The stable kind at the head of an error message as the service writes them
// ("skill_timeout: …", "steps[0] (echo): tool_error: …"), never its text.
export function errorKind(message: string): string {
  return /(?:^|: )([a-z]+(?:_[a-z]+)+)(?=[ :(]|$)/.exec(message)?.[1] ?? "error";
}

// Marks a span failed with a kind; the message stays out (see ATTR).
export function failed(span: Span, kind: string): void {
  span.setAttribute(ATTR.errorType, kind);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

// Runs `fn` inside a new span, current for everything it awaits. A throw
// marks the span failed with `kindOf(error)`.
export async function inSpan<T>(
  name: string,
  options: SpanOptions,
  fn: (span: Span) => Promise<T>,
  kindOf: (err: unknown) => string = (err) => errorKind((err as Error)?.message ?? ""),
  parent: Context = context.active(),
): Promise<T> {
  return tracer().startActiveSpan(name, options, parent, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      failed(span, kindOf(err));
      throw err;
    } finally {
      span.end();
    }
  });
}

// Attributes for the span current here (the server span of a request, when
// nothing narrower is open).
export function annotate(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}

// The W3C `traceparent` of the current span, to store with work that is
// picked up elsewhere (a queued run); null when tracing is off or nothing
// is being traced.
export function currentTraceParent(): string | null {
  const carrier: { traceparent?: string } = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ?? null;
}

// The context a stored `traceparent` names, to continue its trace.
export function contextOf(traceParent: string | null | undefined): Context {
  return traceParent ? propagation.extract(ROOT_CONTEXT, { traceparent: traceParent }) : ROOT_CONTEXT;
}
