import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import type { FastifyError, FastifyInstance, FastifyRequest } from "fastify";
import { NO_OBSERVER, type Observer, type WebhookOutcome } from "../lib/observer.js";
import type { WebhookSourceRow } from "../store/rows.js";
import type { WebhookIngestion } from "../service/webhooks.js";
import { noteTenant } from "./access-log.js";
import { InflightBytes } from "./inflight-bytes.js";

export interface WebhookSurfaceOptions {
  ingestion: WebhookIngestion;
  maxBytes: number;
  // Told of every event's outcome and the triggers it matched (metrics).
  observer?: Observer;
  // Body bytes one tenant may have in flight in this process; past it, 429.
  tenantInflightBytes: number;
}

// What an admitted request holds until it is answered and its handler is done.
interface Admitted {
  source: WebhookSourceRow;
  bytes: number;
  handling: boolean;
  closed: boolean;
  released: boolean;
}

// What each answer means for the sender; 429 is the rate limit until the
// source was admitted, the queued-runs quota after.
const OUTCOMES: Record<number, WebhookOutcome> = {
  202: "accepted",
  200: "duplicate",
  400: "invalid",
  401: "unauthenticated",
  413: "too_large",
  415: "unsupported_media_type",
  429: "rate_limited",
  503: "unavailable",
};

// Fastify's own refusals while reading the body, in the webhook error shape.
const FASTIFY_ERRORS: Record<string, { status: number; error: string; message: string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, error: "unsupported_media_type", message: "Content-Type must be application/json" },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, error: "payload_too_large", message: "body is larger than the limit" },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, error: "invalid_argument", message: "body: is empty" },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, error: "invalid_argument", message: "Content-Length does not match the body" },
};

// POST /webhooks/events: the token is checked (and the source's rate limit
// taken) before the body is read, so unauthenticated senders cost nothing;
// the body limit is enforced while streaming, chunked bodies included.
export async function webhookSurface(
  app: FastifyInstance,
  { ingestion, maxBytes, tenantInflightBytes, observer = NO_OBSERVER }: WebhookSurfaceOptions,
): Promise<void> {
  // The source of every authenticated request (its tenant labels the outcome).
  const sources = new WeakMap<FastifyRequest, WebhookSourceRow>();
  // Requests past the rate limit and the tenant's bytes in flight.
  const admitted = new WeakMap<FastifyRequest, Admitted>();
  const inflight = new InflightBytes(tenantInflightBytes);
  const release = (a: Admitted) => {
    if (a.released) return;
    a.released = true;
    inflight.give(a.source.tenantId, a.bytes);
  };

  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string", bodyLimit: maxBytes }, (_req, body, done) => {
    try {
      done(null, JSON.parse(body as string));
    } catch {
      done(new ConnectError("body: is not valid JSON", Code.InvalidArgument));
    }
  });

  app.setErrorHandler((err: FastifyError | ConnectError, _req, reply) => {
    if (err instanceof ConnectError) {
      const retryAfter = err.metadata.get("retry-after");
      if (retryAfter) void reply.header("retry-after", retryAfter);
      if (err.code === Code.Internal || err.code === Code.Unknown) app.log.error({ err }, "webhook ingestion failed");
      const message = err.code === Code.Internal ? "internal error" : err.rawMessage;
      return reply.status(codeToHttpStatus(err.code)).send({ error: codeToString(err.code), message });
    }
    const known = FASTIFY_ERRORS[err.code];
    if (known) return reply.status(known.status).send({ error: known.error, message: known.message });
    app.log.error({ err }, "webhook ingestion failed");
    return reply.status(500).send({ error: "internal", message: "internal error" });
  });

  app.addHook("onRequest", async (req, reply) => {
    const token = req.headers["x-webhook-token"];
    const source = await ingestion.authenticate(Array.isArray(token) ? token[0] : token);
    sources.set(req, source);
    noteTenant(req, { id: source.tenantId });
    await ingestion.admit(source);
    const declared = Number(req.headers["content-length"]);
    const bytes = Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, maxBytes) : maxBytes;
    if (!inflight.take(source.tenantId, bytes))
      throw new ConnectError("this tenant has too many webhook bytes in flight; retry later", Code.ResourceExhausted, { "retry-after": "1" });
    const a: Admitted = { source, bytes, handling: false, closed: false, released: false };
    admitted.set(req, a);
    // Held until the answer is out (or the connection gone) and the handler
    // is done: a sender that hangs up after its body still holds its share
    // while that body is processed.
    reply.raw.once("close", () => {
      a.closed = true;
      if (!a.handling) release(a);
    });
  });

  app.addHook("onResponse", async (req, reply) => {
    const status = reply.statusCode;
    // A 429 after admission is the tenant's queued-runs quota (accept).
    const outcome = status === 429 && admitted.has(req) ? "over_quota" : (OUTCOMES[status] ?? "error");
    observer.webhook(outcome, sources.get(req)?.tenantId);
  });

  app.post("/webhooks/events", { bodyLimit: maxBytes }, async (req, reply) => {
    const a = admitted.get(req)!;
    a.handling = true;
    try {
      const key = req.headers["idempotency-key"] ?? req.headers["webhook-id"];
      const result = await ingestion.accept(a.source, req.body, Array.isArray(key) ? key[0] : key);
      if (result.status === 202 && result.body.matched_triggers) observer.triggersMatched(a.source.tenantId, result.body.matched_triggers);
      return reply.status(result.status).send(result.body);
    } finally {
      a.handling = false;
      if (a.closed) release(a);
    }
  });
}
