import { createHash } from "node:crypto";
import type { ConnectError } from "@connectrpc/connect";
import { SandboxBacklogError, type ExpressionSandbox, type Outcome } from "../integrations/expressions/sandbox.js";
import type { SecretBox } from "../lib/secret-box.js";
import { annotate, ATTR } from "../lib/tracing.js";
import { header, SIGNATURE_HEADERS, verifySignature, type RequestHeaders, type SignedKind } from "../lib/webhook-signatures.js";
import type { WebhookSourceRow } from "../store/rows.js";
import { invalidArgument, overloaded, retryLater, storeErrorsTranslated } from "./errors.js";
import { checkEventType } from "./event-pattern.js";
import type { WebhookLookups } from "./lookup-cache.js";
import { unauthenticated, type Accepted, type WebhookIngestion } from "./webhooks.js";

// The sealed signing secrets of a source are bound to it and to this field.
export const signingSecretContext = (sourceId: string) => `webhook_source:${sourceId}:signing_secret`;

// A delivery to `POST /webhooks/sources/{id}` as it arrived.
export interface Delivery {
  // The raw body: signatures are over these bytes.
  body: Buffer;
  // "form": `application/x-www-form-urlencoded` (GitHub's `payload=` form).
  format: "json" | "form";
  headers: RequestHeaders;
}

export interface DeliveryOptions {
  ingestion: WebhookIngestion;
  lookups: WebhookLookups;
  secrets: SecretBox;
  sandbox: ExpressionSandbox;
  // Wall-clock budget of a source's mapping on one delivery.
  mappingBudgetMs: number;
  now: () => number;
}

// What a kind makes of a delivery before any mapping: the event it names,
// or why it names none (refused unless a mapping supplies the event).
interface Derived {
  body: unknown;
  eventType?: string;
  payload?: Record<string, unknown>;
  problem?: ConnectError;
  idempotencyKey?: string;
}

// Headers a mapping never sees: credentials and signatures.
const HIDDEN_HEADERS = new Set(["authorization", "proxy-authorization", "cookie", "x-webhook-token", ...SIGNATURE_HEADERS]);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function parseBody(delivery: Delivery): unknown {
  let text = delivery.body.toString("utf8");
  if (delivery.format === "form") {
    const payload = new URLSearchParams(text).get("payload");
    if (payload === null) throw invalidArgument("body", "a form-encoded delivery must carry the event in its payload field");
    text = payload;
  }
  try {
    return JSON.parse(text);
  } catch {
    throw invalidArgument("body", "is not valid JSON");
  }
}

// GitHub signs only the body: its delivery id and event headers can be
// changed at will. Keyed by the body's digest, a captured delivery re-sent
// under a new delivery id or event type is a duplicate for as long as the
// idempotency window; a redelivery from GitHub (same id, same body) is too.
const githubIdempotencyKey = (raw: Buffer) => `sha256:${createHash("sha256").update(raw).digest("hex")}`;

// Each kind's event type, payload and idempotency key (see the proto's
// WebhookSourceKind and docs/guide/signed-webhooks.md).
function derive(kind: SignedKind, delivery: Delivery, body: unknown): Derived {
  const { headers } = delivery;
  const fields = isObject(body) ? body : {};
  const notAnObject = isObject(body) ? undefined : invalidArgument("body", "must be a JSON object");
  switch (kind) {
    case "standard_webhooks": {
      const type = fields.type;
      return {
        body,
        eventType: typeof type === "string" ? type : undefined,
        // The spec's body is `{type, timestamp, data}`: the event is `data`.
        payload: isObject(fields.data) ? fields.data : isObject(body) ? body : undefined,
        problem: notAnObject ?? (typeof type === "string" ? undefined : invalidArgument("type", "the body has no event type (a string `type`); a mapping can supply one")),
        idempotencyKey: header(headers, "webhook-id") ?? header(headers, "svix-id"),
      };
    }
    case "github": {
      const event = header(headers, "x-github-event");
      const action = typeof fields.action === "string" ? `.${fields.action}` : "";
      return {
        body,
        eventType: event ? `github.${event}${action}` : undefined,
        payload: isObject(body) ? body : undefined,
        problem: notAnObject ?? (event ? undefined : invalidArgument("X-GitHub-Event", "is required")),
        idempotencyKey: githubIdempotencyKey(delivery.body),
      };
    }
    case "stripe": {
      const type = fields.type;
      return {
        body,
        eventType: typeof type === "string" ? `stripe.${type}` : undefined,
        payload: isObject(body) ? body : undefined,
        problem: notAnObject ?? (typeof type === "string" ? undefined : invalidArgument("type", "the Stripe event has no type")),
        idempotencyKey: typeof fields.id === "string" ? fields.id : undefined,
      };
    }
  }
}

function mappingHeaders(headers: RequestHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const key = name.toLowerCase();
    if (value === undefined || HIDDEN_HEADERS.has(key)) continue;
    out[key] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

// Deliveries of providers that cannot send our envelope: the source named in
// the URL, the signature over the raw body, the kind's event, the source's
// mapping; then the same ingestion as every event (validation, matching,
// queued-runs quota, one transaction for the event and its runs).
export function createWebhookDeliveries({ ingestion, lookups, secrets, sandbox, mappingBudgetMs, now }: DeliveryOptions) {
  // Opened secrets of a cached row, so a delivery costs no decryption; a
  // changed row is a new object (the cache is dropped on every change).
  const opened = new WeakMap<WebhookSourceRow, { current: string; previous?: string }>();

  function secretsOf(source: WebhookSourceRow, t: number): string[] {
    let keys = opened.get(source);
    if (!keys) {
      const context = signingSecretContext(source.id);
      keys = {
        current: secrets.open(source.signingSecret!, context),
        previous: source.previousSigningSecret ? secrets.open(source.previousSigningSecret, context) : undefined,
      };
      opened.set(source, keys);
    }
    const previousValid = keys.previous !== undefined && (source.previousSigningSecretExpireTime ?? 0) > t;
    return previousValid ? [keys.current, keys.previous!] : [keys.current];
  }

  // The mapping's event, or a 400 saying why there is none.
  async function mapped(source: WebhookSourceRow, input: { body: unknown; headers: Record<string, string>; event_type?: string }) {
    let outcomes: Outcome[];
    try {
      outcomes = await sandbox.evaluate(source.tenantId, [source.mapping!], input, mappingBudgetMs, "mapping");
    } catch (err) {
      if (err instanceof SandboxBacklogError)
        throw retryLater("this tenant's expressions are backlogged; retry later", 1);
      throw err;
    }
    const outcome = outcomes[0]!;
    if (!outcome.ok) {
      if (outcome.kind === "error") throw invalidArgument("mapping", `failed: ${outcome.message}`);
      if (outcome.kind === "timeout") throw invalidArgument("mapping", `exceeded its ${mappingBudgetMs} ms budget`);
      if (outcome.kind === "overloaded") throw overloaded("the source's mapping");
      // Past the size limits, or its process's memory: the same to the sender.
      if (outcome.kind === "limit" || outcome.kind === "memory") throw invalidArgument("mapping", `expression_limit: ${outcome.message}`);
      throw invalidArgument("mapping", `stopped by its ${outcome.kind} limit: ${outcome.message}`);
    }
    const { value } = outcome;
    if (!isObject(value) || typeof value.event_type !== "string" || !isObject(value.payload))
      throw invalidArgument("mapping", 'must produce {"event_type": <dotted name>, "payload": <object>}');
    checkEventType("mapping: event_type", value.event_type);
    return { event_type: value.event_type, payload: value.payload };
  }

  return storeErrorsTranslated({
    // Before the body is read: the source a delivery's URL names, if it is
    // an enabled signed source; otherwise the bad token's 401, so the URL
    // tells nothing about which sources exist.
    async source(id: string): Promise<WebhookSourceRow> {
      if (!/^src_[0-9a-f-]{36}$/.test(id)) throw unauthenticated();
      const source = lookups.cachedSourceById(id) ?? (await lookups.loadSourceById(id));
      if (!source || !source.enabled || source.kind === "envelope" || !source.signingSecret) throw unauthenticated();
      annotate({ [ATTR.tenant]: source.tenantId, [ATTR.source]: source.id });
      return source;
    },

    // The signature, before anything of the body is parsed.
    verify(source: WebhookSourceRow, delivery: Delivery): void {
      const t = now();
      if (!verifySignature(source.kind as SignedKind, secretsOf(source, t), delivery.body, delivery.headers, t)) throw unauthenticated();
    },

    // A verified delivery in as an event.
    async receive(source: WebhookSourceRow, delivery: Delivery, signal?: AbortSignal): Promise<Accepted> {
      const derived = derive(source.kind as SignedKind, delivery, parseBody(delivery));
      if (source.mapping) {
        const event = await mapped(source, { body: derived.body, headers: mappingHeaders(delivery.headers), event_type: derived.eventType });
        return ingestion.accept(source, event, derived.idempotencyKey, signal);
      }
      if (derived.problem) throw derived.problem;
      checkEventType("event_type", derived.eventType!);
      return ingestion.accept(source, { event_type: derived.eventType, payload: derived.payload }, derived.idempotencyKey, signal);
    },

    // An envelope source's event: its body as sent, or what its mapping makes
    // of the body. `signal`: as for `accept`.
    async envelope(source: WebhookSourceRow, body: unknown, headers: RequestHeaders, idempotencyKey: string | undefined, signal?: AbortSignal): Promise<Accepted> {
      if (!source.mapping) return ingestion.accept(source, body, idempotencyKey, signal);
      const eventType = isObject(body) && typeof body.event_type === "string" ? body.event_type : undefined;
      const event = await mapped(source, { body, headers: mappingHeaders(headers), event_type: eventType });
      return ingestion.accept(source, event, idempotencyKey, signal);
    },
  });
}

export type WebhookDeliveries = ReturnType<typeof createWebhookDeliveries>;
