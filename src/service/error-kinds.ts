import type { Outcome } from "../integrations/expressions/sandbox.js";
import { SKILL_ERROR_KINDS } from "../integrations/mcp-client/errors.js";
import { MODEL_ERROR_KINDS } from "../integrations/model/chat-model.js";

// What kind of failure a run's error names: read by the runtime (metrics,
// logs) and by the tenant overview, so it lives with the service.
// The stable kinds a failed run's error can start with: those of skill and
// model calls, of step arguments (runtime/agent-executor.ts), the step
// limit, and the run's record.
const KINDS: ReadonlySet<string> = new Set<string>([
  ...SKILL_ERROR_KINDS,
  ...MODEL_ERROR_KINDS,
  "expression_timeout",
  "expression_limit",
  "expression_error",
  "max_steps",
  // What a run records (runtime/recordable.ts, runtime/worker.ts): its record is full, or
  // the store refused its outcome for good.
  "record_limit",
  "record_rejected",
]);

// The kind a failed expression's error starts with, for a step's arguments
// (runtime/agent-executor.ts) and TestExpression alike: one cut off by the
// machine's load (`overloaded`) counts as a timeout.
export function expressionErrorKind(outcome: Extract<Outcome, { ok: false }>): "expression_timeout" | "expression_error" | "expression_limit" {
  if (outcome.kind === "timeout" || outcome.kind === "overloaded") return "expression_timeout";
  return outcome.kind === "error" ? "expression_error" : "expression_limit";
}

// "steps[2] (tool): skill_timeout: …", "steps[0].arguments: expression_timeout: …",
// "model_error: …", "skill_auth_failed (token request): …". Only the leading
// word counts: the rest is text from a customer server or a tool.
const LEADING_KIND = /^(?:steps\[\d+\][^:]*: )?([a-z_]+)\b/;

// The known kind a run or step error starts with, else `other` (a missing
// agent or skill, a refused tool, an unexpected error): bounded, so it can
// label a metric and be searched for in logs.
export function errorKindOfMessage(message: string): string {
  const word = LEADING_KIND.exec(message)?.[1];
  return word !== undefined && KINDS.has(word) ? word : "other";
}

// Why a run attempt failed: a known kind, `agent_timeout`, or `other`.
export function errorKindOf(result: { status: string; error?: string }): string {
  if (result.status === "succeeded") return "";
  if (result.status === "timed_out") return "agent_timeout";
  return errorKindOfMessage(result.error ?? "");
}
