// TestExpression: a filter, mapping or plan step's arguments tried before
// they are saved, through the same path as the real thing: the same
// compile-time checks (syntax, RE2), the same sandbox (inline slice or a
// sandbox process, fair between tenants, charged to this tenant), the same
// kind's budget and mode, the same shape rules on the result. Nothing is
// stored; what the expression does wrong is the answer, not an RPC error.
import { fromJson, toJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema, durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import jsonata from "jsonata";
import { ExpressionKind, type ExpressionErrorSchema } from "../../gen/platform/v1/expression_pb.js";
import { SandboxBacklogError, type Mode, type Outcome } from "../integrations/expressions/sandbox.js";
import type { EventRow } from "../store/rows.js";
import { invalidArgument, notFound, overloaded, retryLater } from "./errors.js";
import { expressionErrorKind } from "./error-kinds.js";
import { checkEventType } from "./event-pattern.js";
import { checkJsonata } from "./expressions.js";
import { tenantOf, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { nestsDeeperThan } from "./json-depth.js";
import { MAX_LENGTH } from "./limits.js";

export interface TrialBudgets {
  // A trigger filter's and a source mapping's budget (the filter policy's).
  filterMs: number;
  // A plan step's arguments' budget (AGENTPLANE_STEP_EXPRESSION_BUDGET_MS).
  stepMs: number;
}

type ExpressionError = MessageInitShape<typeof ExpressionErrorSchema>;

interface KindRule {
  field: string;
  maxLength: number;
  mode: Mode;
  budget(b: TrialBudgets): number;
  // What the expression sees, from a stored event or a given document.
  context(input: { event: EventRow } | { document: unknown; eventType: string }): unknown;
  // A result of the wrong shape, as the real path refuses it.
  refuse(value: unknown): string | undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const RULES: Record<Exclude<ExpressionKind, ExpressionKind.UNSPECIFIED>, KindRule> = {
  // service/event-matching.ts
  [ExpressionKind.FILTER]: {
    field: "trigger.webhook.filter",
    maxLength: MAX_LENGTH.filter,
    mode: "filter",
    budget: (b) => b.filterMs,
    context: (i) => ("event" in i ? { event_type: i.event.eventType, payload: i.event.payload } : { event_type: i.eventType, payload: i.document }),
    refuse: () => undefined,
  },
  // service/webhook-deliveries.ts (`mapped`)
  [ExpressionKind.MAPPING]: {
    field: "webhook_source.mapping",
    maxLength: MAX_LENGTH.mapping,
    mode: "mapping",
    budget: (b) => b.filterMs,
    context: (i) =>
      "event" in i
        ? { body: i.event.payload, headers: {}, event_type: i.event.eventType }
        : { body: i.document, headers: {}, ...(i.eventType ? { event_type: i.eventType } : {}) },
    refuse(value) {
      if (!isObject(value) || typeof value.event_type !== "string" || !isObject(value.payload))
        return 'must produce {"event_type": <dotted name>, "payload": <object>}';
      try {
        checkEventType("mapping: event_type", value.event_type);
      } catch (err) {
        return (err as ConnectError).rawMessage;
      }
      return undefined;
    },
  },
  // runtime/agent-executor.ts (`context`, `stepArguments`)
  [ExpressionKind.STEP_ARGUMENTS]: {
    field: "agent.steps[].arguments",
    maxLength: MAX_LENGTH.stepArguments,
    mode: "value",
    budget: (b) => b.stepMs,
    context: (i) =>
      "event" in i
        ? {
            event: {
              id: i.event.id,
              event_type: i.event.eventType,
              payload: i.event.payload,
              source_id: i.event.sourceId,
              receive_time: new Date(i.event.receiveTime).toISOString(),
            },
            steps: [],
          }
        : { input: i.document, steps: [] },
    refuse: (value) => (isObject(value) ? undefined : `must evaluate to an object, got ${JSON.stringify(value) ?? "nothing"}`),
  },
};

// The syntax error JSONata reports, with its position; then the save-time
// checks (length, RE2) as the field they are meant for applies them.
function compileProblem(rule: KindRule, expression: string): ExpressionError | undefined {
  try {
    jsonata(expression);
  } catch (err) {
    const e = err as { message?: string; position?: number };
    return { kind: "expression_error", message: e.message ?? String(err), position: e.position };
  }
  try {
    checkJsonata(rule.field, expression, rule.maxLength);
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.InvalidArgument) return { kind: "expression_error", message: err.rawMessage };
    throw err;
  }
  return undefined;
}

// The words a failed run's error starts with (runtime/agent-executor.ts).
function outcomeError(outcome: Exclude<Outcome, { ok: true }>): ExpressionError {
  return { kind: expressionErrorKind(outcome), message: outcome.message };
}

export function expressionTrialHandlers({ store, sandbox, jsonMaxDepth }: ServiceDeps, budgets: TrialBudgets): Pick<PlatformHandlers, "testExpression"> {
  return {
    async testExpression(req, call) {
      const tenant = tenantOf(call);
      if (req.kind === ExpressionKind.UNSPECIFIED) throw invalidArgument("kind", "filter, mapping or step_arguments is required");
      const rule = RULES[req.kind];
      if (!req.expression.trim()) throw invalidArgument("expression", "is required");
      let input: Parameters<KindRule["context"]>[0];
      if (req.input.case === "eventId") {
        const event = await store.events.get(tenant.id, req.input.value);
        if (!event) throw notFound("event", req.input.value);
        input = { event };
      } else if (req.input.case === "document") {
        const document = toJson(ValueSchema, req.input.value);
        if (nestsDeeperThan(document, jsonMaxDepth)) throw invalidArgument("document", `nests deeper than ${jsonMaxDepth} levels`);
        if (req.kind === ExpressionKind.FILTER && !isObject(document)) throw invalidArgument("document", "a filter's payload must be a JSON object");
        input = { document, eventType: req.eventType };
      } else throw invalidArgument("input", "an event_id or a document is required");

      const budgetMs = rule.budget(budgets);
      const budget = durationFromMs(budgetMs);
      const problem = compileProblem(rule, req.expression);
      if (problem) return { error: problem, budget };
      let outcome: Outcome;
      try {
        [outcome] = (await sandbox.evaluate(tenant.id, [req.expression], rule.context(input), budgetMs, rule.mode)) as [Outcome];
      } catch (err) {
        if (err instanceof SandboxBacklogError)
          throw retryLater("this tenant's expressions are backlogged; retry later", 1);
        throw err;
      }
      // Not an answer about the expression: asked again, it may have one.
      if (!outcome.ok && outcome.kind === "overloaded") throw overloaded("the expression");
      if (!outcome.ok) return { error: outcomeError(outcome), budget };
      const refused = rule.refuse(outcome.value);
      const result = outcome.value === undefined ? undefined : fromJson(ValueSchema, outcome.value as JsonValue);
      if (refused) return { result, error: { kind: "expression_error", message: refused }, budget };
      return { result, matched: req.kind === ExpressionKind.FILTER && outcome.value === true, budget };
    },
  };
}
