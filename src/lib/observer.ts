// What the surfaces, service, runtime and integrations report as they work,
// for metrics (src/metrics.ts implements it). Every call is synchronous and
// cheap, a counter increment at most, so the hot paths never wait on it;
// labels are bounded sets, and `tenantId` is kept only when the operator
// asks for a tenant label. Inner layers depend on this interface, never on
// prom-client.

export const WEBHOOK_OUTCOMES = [
  "accepted",
  "duplicate",
  "unauthenticated",
  "invalid",
  "timed_out",
  "too_large",
  "unsupported_media_type",
  "rate_limited",
  "over_quota",
  "unavailable",
  "error",
] as const;

export type WebhookOutcome = (typeof WEBHOOK_OUTCOMES)[number];

export type RunEndStatus = "succeeded" | "failed" | "timed_out";

// `ok`, or the stable error kind of the call (a SkillErrorKind, a ModelErrorKind).
export type CallOutcome = string;

// A fired slot queued its run; `skipped`: the tenant was at its queued-runs
// quota; `missed`: slots that passed while no scheduler ran (only the latest
// of them fires).
export type SlotOutcome = "fired" | "skipped" | "missed";

// `ok`; `refused`: the endpoint answered but gave no token; `failed`: no answer.
export type TokenRequestOutcome = "ok" | "refused" | "failed";

// `active`: a usable token; `inactive`: refused (inactive, expired, not
// ours); `error`: no usable answer (the identity provider is unavailable).
export type IntrospectionOutcome = "active" | "inactive" | "error";

// What a tenant expression is for: a trigger filter, a step's arguments, a
// webhook source's mapping.
export type ExpressionUse = "filter" | "step" | "mapping";

export interface Observer {
  webhook(outcome: WebhookOutcome, tenantId?: string): void;
  // Triggers an accepted event matched (one run queued each).
  triggersMatched(tenantId: string, count: number): void;
  // A run attempt's recorded outcome; `errorKind` is "" when it succeeded.
  runFinished(tenantId: string, status: RunEndStatus, errorKind: string, seconds: number): void;
  // A step of a run claimed again whose recorded outcome was reused, not
  // executed again (durable steps).
  stepResumed(tenantId: string, kind: "tool_call" | "model_call"): void;
  // One try of a tool call (connecting included).
  skillCall(tenantId: string, outcome: CallOutcome, seconds: number): void;
  tokenRequest(outcome: TokenRequestOutcome): void;
  // One try of a model call, with the tokens the provider counted.
  modelCall(tenantId: string, outcome: CallOutcome, seconds: number, tokens?: { prompt: number; completion: number }): void;
  // Tenant expressions: where they ran, and which were cut off and why.
  expressionPlaced(use: ExpressionUse, where: "inline" | "sandbox"): void;
  expressionOverrun(use: ExpressionUse, reason: string): void;
  scheduleSlots(outcome: SlotOutcome, count: number): void;
  introspection(outcome: IntrospectionOutcome): void;
  jwksFetch(outcome: "ok" | "error"): void;
  // Caches of validated (and refused) access tokens.
  tokenCache(result: "hit" | "miss"): void;
}

const nothing = () => {};

export const NO_OBSERVER: Observer = {
  webhook: nothing,
  triggersMatched: nothing,
  runFinished: nothing,
  stepResumed: nothing,
  skillCall: nothing,
  tokenRequest: nothing,
  modelCall: nothing,
  expressionPlaced: nothing,
  expressionOverrun: nothing,
  scheduleSlots: nothing,
  introspection: nothing,
  jwksFetch: nothing,
  tokenCache: nothing,
};
