import { Code, ConnectError } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { newId } from "../lib/ids.js";
import { annotate, ATTR, currentTraceParent, inSpan, tracer } from "../lib/tracing.js";
import { webhookTokenDigest } from "../lib/webhook-token.js";
import { StoreQuotaError } from "../store/errors.js";
import { queuedRun } from "../store/queued-run.js";
import type { WebhookSourceRow } from "../store/rows.js";
import type { Store } from "../store/store.js";
import { fromStoreError, invalidArgument, retryLater, storeErrorsTranslated } from "./errors.js";
import type { EventMatcher } from "./event-matching.js";
import { checkEventType } from "./event-pattern.js";
import { nestsDeeperThan } from "./json-depth.js";
import type { WebhookLookups } from "./lookup-cache.js";
import { DEFAULT_JSON_MAX_DEPTH, DEFAULT_QUOTAS, MAX_LENGTH } from "./limits.js";
import { QueuedRunCounts, type RunsQueued } from "./queued-runs.js";
import { quotaError } from "./quotas.js";
import { RateLimiter } from "./rate-limit.js";
import { checkStorableJson } from "./validate.js";

export const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000;
const TOKEN_SHAPE = /^whk_[A-Za-z0-9_-]{20,200}$/;

export interface WebhookOptions {
  store: Store;
  matcher: EventMatcher;
  // The source by token and the compiled triggers, cached until the store
  // says they changed.
  lookups: WebhookLookups;
  ratePerSecond: number;
  burst: number;
  now?: () => number;
  // Called after runs were committed, so workers wake without polling.
  onRunsQueued?: RunsQueued;
  // Deepest nesting of a payload.
  maxDepth?: number;
  // Most queued runs per tenant; an event whose runs would pass it is refused.
  maxQueuedRuns?: number;
}

// What became of an event: stored with the runs it queued, or a duplicate
// of one stored before under the same idempotency key (how a surface
// answers either is its own business).
// The source a webhook request was authenticated as, handed back to
// `admit` and `accept` by the surface.
export type WebhookSource = WebhookSourceRow;

export type Accepted = { eventId: string; duplicate: false; matchedTriggers: number } | { eventId: string; duplicate: true };

// One message for every token failure, so a caller learns nothing about
// which tokens or sources exist.
export const unauthenticated = () => new ConnectError("invalid or missing webhook token", Code.Unauthenticated);

// A refusal's kind on a span: the Connect code, as the answer names it.
const refusalKind = (err: unknown) => (err instanceof ConnectError ? codeToString(err.code) : "internal");

export function createWebhookIngestion(options: WebhookOptions) {
  const { store } = options;
  const now = options.now ?? Date.now;
  const limiter = new RateLimiter({ store: store.rateLimits, ratePerSecond: options.ratePerSecond, burst: options.burst, now });
  const { matcher, lookups } = options;
  const maxDepth = options.maxDepth ?? DEFAULT_JSON_MAX_DEPTH;
  const maxQueuedRuns = options.maxQueuedRuns ?? DEFAULT_QUOTAS.queuedRuns;
  const queuedRuns = new QueuedRunCounts((tenantId) => store.runs.queuedCount(tenantId));

  // 429 so the sender retries later; nothing of the event is stored.
  async function overQuota(tenantId: string): Promise<ConnectError> {
    const tenant = await store.tenants.get(tenantId);
    const err = quotaError(tenant?.slug ?? tenantId, { ...DEFAULT_QUOTAS, queuedRuns: maxQueuedRuns }, "queuedRuns");
    return retryLater(err.rawMessage, 1, err.code);
  }

  // The source's token bucket: every event it sends takes a token, however it came.
  async function admit(source: WebhookSourceRow): Promise<void> {
    const taken = await limiter.take(source.id);
    if (!taken.ok)
      throw retryLater("rate limit exceeded for this webhook source", taken.retryAfterSeconds);
  }

  const ingestion = {
    // Before the body is read: who is sending (then `admit`: may it send now).
    async authenticate(token: string | undefined): Promise<WebhookSourceRow> {
      if (!token || !TOKEN_SHAPE.test(token)) throw unauthenticated();
      const digest = webhookTokenDigest(token);
      const source = lookups.cachedSource(digest, now()) ?? (await lookups.loadSource(digest, now()));
      if (!source || !source.enabled) throw unauthenticated();
      annotate({ [ATTR.tenant]: source.tenantId, [ATTR.source]: source.id });
      return source;
    },

    admit,

    // Validates the event, queues a run per matching trigger, and answers only
    // once the event and its runs are committed together. `signal`: the
    // sender went away before its answer; what is left of matching is not
    // done and nothing is stored (unacknowledged, it will be sent again).
    async accept(source: WebhookSourceRow, body: unknown, idempotencyKey: string | undefined, signal?: AbortSignal): Promise<Accepted> {
      if (typeof body !== "object" || body === null || Array.isArray(body)) throw invalidArgument("body", "must be a JSON object");
      const { event_type: eventType, payload } = body as Record<string, unknown>;
      if (typeof eventType !== "string") throw invalidArgument("event_type", "is required and must be a string");
      checkEventType("event_type", eventType);
      if (typeof payload !== "object" || payload === null || Array.isArray(payload))
        throw invalidArgument("payload", "is required and must be a JSON object");
      if (nestsDeeperThan(payload, maxDepth)) throw invalidArgument("payload", `must not nest deeper than ${maxDepth} levels`);
      checkStorableJson("payload", payload);
      if (idempotencyKey !== undefined && (idempotencyKey.length === 0 || idempotencyKey.length > MAX_LENGTH.idempotencyKey))
        throw invalidArgument("Idempotency-Key", `must be 1 to ${MAX_LENGTH.idempotencyKey} characters`);

      const t = now();
      const triggers =
        lookups.cachedTriggers(source.tenantId, source.id) ?? (await lookups.loadTriggers(source.tenantId, source.id));
      const match = tracer().startSpan("match triggers");
      const matched = await matcher
        .matching(source.tenantId, triggers.matching(eventType), eventType, payload as Record<string, unknown>, signal)
        .finally(() => match.end());
      if (signal?.aborted) throw new ConnectError("the sender went away before the event was stored", Code.Canceled);
      annotate({ [ATTR.eventType]: eventType, [ATTR.matched]: matched.length });
      // A cheap early refusal from this process's recent count; the store
      // enforces the cap exactly when it commits the runs.
      if (matched.length) {
        const queued = queuedRuns.fresh(source.tenantId, t) ?? (await queuedRuns.get(source.tenantId, t));
        if (queued + matched.length > maxQueuedRuns) throw await overQuota(source.tenantId);
      }
      const eventId = newId("evt");
      annotate({ [ATTR.event]: eventId });
      // The runs' spans continue the ingest span's trace, wherever they execute.
      const traceParent = currentTraceParent();
      const runs = matched.map((m) => queuedRun({ tenantId: source.tenantId, agentId: m.agentId, triggerId: m.id, eventId, traceParent }, t));
      const commit = tracer().startSpan("commit event");
      const result = await store.webhooks
        .ingest(
          {
            event: {
              id: eventId,
              tenantId: source.tenantId,
              sourceId: source.id,
              eventType,
              payload: payload as Record<string, unknown>,
              receiveTime: t,
              idempotencyKey: idempotencyKey ?? null,
              matchedTriggerIds: matched.map((m) => m.id),
              createTime: t,
              updateTime: t,
            },
            runs,
            maxQueuedRuns,
          },
          IDEMPOTENCY_WINDOW_MS,
        )
        .catch(async (err: unknown) => {
          if (err instanceof StoreQuotaError) throw await overQuota(source.tenantId);
          throw err;
        })
        .finally(() => commit.end());
      if (result.duplicate) return { eventId: result.eventId, duplicate: true };
      if (matched.length) {
        queuedRuns.added(source.tenantId, matched.length);
        options.onRunsQueued?.("webhook", runs);
      }
      return { eventId: result.eventId, duplicate: false, matchedTriggers: matched.length };
    },
  };
  return storeErrorsTranslated({
    ...ingestion,
    // One span over validation, matching and the commit, its refusal kind
    // the API's (store errors translated inside it).
    accept: (source: WebhookSourceRow, body: unknown, idempotencyKey: string | undefined, signal?: AbortSignal): Promise<Accepted> =>
      inSpan(
        "ingest event",
        { attributes: { [ATTR.tenant]: source.tenantId, [ATTR.source]: source.id } },
        () => ingestion.accept(source, body, idempotencyKey, signal).catch(fromStoreError),
        refusalKind,
      ),
  });
}

export type WebhookIngestion = ReturnType<typeof createWebhookIngestion>;
