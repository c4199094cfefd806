// The domain series, and the Observer that feeds them. Built once on the
// HTTP thread and once in each runtime thread (whose registries the HTTP
// thread merges when scraped, see metrics.ts). Labels are bounded sets; the
// tenant label, when on, carries the tenant id here and the slug once scraped.
import { Counter, Histogram, type Registry } from "prom-client";
import { SKILL_ERROR_KINDS } from "./integrations/mcp-client/errors.js";
import { MODEL_ERROR_KINDS } from "./integrations/model/chat-model.js";
import { WEBHOOK_OUTCOMES, type Observer } from "./lib/observer.js";

const SKILL_OUTCOMES = new Set<string>(["ok", ...SKILL_ERROR_KINDS]);
const MODEL_OUTCOMES = new Set<string>(["ok", ...MODEL_ERROR_KINDS]);
const bounded = (known: Set<string>, value: string) => (known.has(value) ? value : "other");

export function createDomainMetrics(registry: Registry, tenantLabel: boolean): Observer {
  const registers = [registry];
  // The tenant-scoped series: webhook events, matched triggers, runs, skill
  // and model calls, tokens. Histograms never carry a tenant label: each
  // tenant would cost a dozen series per label set.
  const t = tenantLabel ? (["tenant"] as const) : ([] as const);
  const scoped = <L extends Record<string, string>>(labels: L, tenantId: string | undefined): L =>
    tenantLabel ? { ...labels, tenant: tenantId ?? "" } : labels;

  const webhookEvents = new Counter({
    name: "agentplane_webhook_events_total",
    help: "Requests to POST /webhooks/events by outcome",
    labelNames: ["outcome", ...t],
    registers,
  });
  const triggersMatched = new Counter({
    name: "agentplane_triggers_matched_total",
    help: "Triggers matched by accepted webhook events (one run queued each)",
    labelNames: [...t],
    registers,
  });
  const runsFinished = new Counter({
    name: "agentplane_runs_finished_total",
    help: "Run attempts whose outcome was recorded, by status and error kind (none when succeeded; other when not a known kind)",
    labelNames: ["status", "error_kind", ...t],
    registers,
  });
  const runDuration = new Histogram({
    name: "agentplane_run_duration_seconds",
    help: "Execution time of a run attempt, by status",
    labelNames: ["status"],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900],
    registers,
  });
  const stepsResumed = new Counter({
    name: "agentplane_run_steps_resumed_total",
    help: "Steps of runs claimed again whose recorded outcome was reused instead of executed again (durable steps), by kind (tool_call, model_call)",
    labelNames: ["kind", ...t],
    registers,
  });
  const skillCalls = new Counter({
    name: "agentplane_skill_calls_total",
    help: "Tries of tool calls on customer MCP servers, by outcome (ok or the skill error kind)",
    labelNames: ["outcome", ...t],
    registers,
  });
  const skillDuration = new Histogram({
    name: "agentplane_skill_call_duration_seconds",
    help: "Time of a tool call try (connecting included), by outcome",
    labelNames: ["outcome"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers,
  });
  const tokenRequests = new Counter({
    name: "agentplane_oauth_token_requests_total",
    help: "Client-credentials token requests to skills' issuers, by outcome (ok, refused, failed)",
    labelNames: ["outcome"],
    registers,
  });
  const modelCalls = new Counter({
    name: "agentplane_model_calls_total",
    help: "Tries of model calls, by outcome (ok or the model error kind)",
    labelNames: ["outcome", ...t],
    registers,
  });
  const modelDuration = new Histogram({
    name: "agentplane_model_call_duration_seconds",
    help: "Time of a model call try, by outcome",
    labelNames: ["outcome"],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120],
    registers,
  });
  const modelTokens = new Counter({
    name: "agentplane_model_tokens_total",
    help: "Tokens model providers counted, by type (prompt, completion)",
    labelNames: ["type", ...t],
    registers,
  });
  // Tenant-authored expressions cut off by their budget or limits, by use
  // (trigger filter, step arguments, source mapping) and reason.
  const expressionOverruns = new Counter({
    name: "agentplane_expression_overruns_total",
    help: "Tenant expressions stopped by their time budget, depth, size or memory limit",
    labelNames: ["use", "reason"],
    registers,
  });
  const expressionEvaluations = new Counter({
    name: "agentplane_expression_evaluations_total",
    help: "Tenant expressions evaluated, by use and where: inline (bounded, within the tenant's share of the service thread) or in a sandbox process",
    labelNames: ["use", "where"],
    registers,
  });
  const scheduleSlots = new Counter({
    name: "agentplane_schedule_slots_total",
    help: "Schedule slots by outcome: fired, skipped (queued-runs quota), missed (passed while no scheduler ran)",
    labelNames: ["outcome"],
    registers,
  });
  const introspections = new Counter({
    name: "agentplane_introspection_requests_total",
    help: "Token introspection requests by outcome (active, inactive, error)",
    labelNames: ["outcome"],
    registers,
  });
  const jwksFetches = new Counter({
    name: "agentplane_jwks_fetches_total",
    help: "JWKS fetches from the identity provider by outcome (ok, error)",
    labelNames: ["outcome"],
    registers,
  });
  const tokenCache = new Counter({
    name: "agentplane_token_cache_lookups_total",
    help: "Access token cache look-ups (validated and refused tokens) by result (hit, miss)",
    labelNames: ["result"],
    registers,
  });

  // Known series start at zero, so rates and ratios exist before the first event.
  if (!tenantLabel) for (const outcome of WEBHOOK_OUTCOMES) webhookEvents.inc({ outcome }, 0);
  if (!tenantLabel) for (const kind of ["tool_call", "model_call"]) stepsResumed.inc({ kind }, 0);
  for (const outcome of ["ok", "refused", "failed"]) tokenRequests.inc({ outcome }, 0);
  for (const outcome of ["fired", "skipped", "missed"]) scheduleSlots.inc({ outcome }, 0);
  for (const outcome of ["active", "inactive", "error"]) introspections.inc({ outcome }, 0);
  for (const outcome of ["ok", "error"]) jwksFetches.inc({ outcome }, 0);
  for (const result of ["hit", "miss"]) tokenCache.inc({ result }, 0);

  return {
    webhook: (outcome, tenantId) => webhookEvents.inc(scoped({ outcome }, tenantId)),
    triggersMatched: (tenantId, count) => triggersMatched.inc(scoped({}, tenantId), count),
    runFinished(tenantId, status, errorKind, seconds) {
      runsFinished.inc(scoped({ status, error_kind: errorKind || "none" }, tenantId));
      runDuration.observe({ status }, seconds);
    },
    stepResumed: (tenantId, kind) => stepsResumed.inc(scoped({ kind }, tenantId)),
    skillCall(tenantId, outcome, seconds) {
      const o = bounded(SKILL_OUTCOMES, outcome);
      skillCalls.inc(scoped({ outcome: o }, tenantId));
      skillDuration.observe({ outcome: o }, seconds);
    },
    tokenRequest: (outcome) => tokenRequests.inc({ outcome }),
    modelCall(tenantId, outcome, seconds, tokens) {
      const o = bounded(MODEL_OUTCOMES, outcome);
      modelCalls.inc(scoped({ outcome: o }, tenantId));
      modelDuration.observe({ outcome: o }, seconds);
      if (tokens) {
        modelTokens.inc(scoped({ type: "prompt" }, tenantId), tokens.prompt);
        modelTokens.inc(scoped({ type: "completion" }, tenantId), tokens.completion);
      }
    },
    expressionPlaced: (use, where) => expressionEvaluations.inc({ use, where }),
    expressionOverrun: (use, reason) => expressionOverruns.inc({ use, reason }),
    scheduleSlots: (outcome, count) => scheduleSlots.inc({ outcome }, count),
    introspection: (outcome) => introspections.inc({ outcome }),
    jwksFetch: (outcome) => jwksFetches.inc({ outcome }),
    tokenCache: (result) => tokenCache.inc({ result }),
  };
}
