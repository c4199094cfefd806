import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { NO_OBSERVER, type Observer, type WebhookOutcome } from "../lib/observer.js";
import type { WebhookSourceRow } from "../store/rows.js";
import type { Accepted, WebhookIngestion } from "../service/webhooks.js";
import type { Delivery, WebhookDeliveries } from "../service/webhook-deliveries.js";
import { noteTenant } from "./access-log.js";
import { InflightBytes } from "./inflight-bytes.js";

export interface WebhookSurfaceOptions {
  ingestion: WebhookIngestion;
  // Signed kinds' deliveries, and envelope sources' mappings.
  deliveries: WebhookDeliveries;
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
  // Past the source's rate limit too: a 429 now is the queued-runs quota.
  rated: boolean;
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

const TOO_LARGE = FASTIFY_ERRORS.FST_ERR_CTP_BODY_TOO_LARGE!;

const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

// POST /webhooks/events: the token is checked (and the source's rate limit
// taken) before the body is read, so unauthenticated senders cost nothing;
// the body limit is enforced while streaming, chunked bodies included.
// POST /webhooks/sources/{id}: a signed kind's delivery, whose signature can
// only be checked on the whole body (its scope below says in which order).
export async function webhookSurface(
  app: FastifyInstance,
  { ingestion, deliveries, maxBytes, tenantInflightBytes, observer = NO_OBSERVER }: WebhookSurfaceOptions,
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

  // Holds the source's tenant's share of bytes in flight until the answer is
  // out (or the connection gone) and the handler is done: a sender that
  // hangs up after its body still holds its share while that body is
  // processed.
  const hold = (req: FastifyRequest, reply: FastifyReply, source: WebhookSourceRow, rated: boolean): void => {
    const declared = Number(req.headers["content-length"]);
    const bytes = Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, maxBytes) : maxBytes;
    if (!inflight.take(source.tenantId, bytes))
      throw new ConnectError("this tenant has too many webhook bytes in flight; retry later", Code.ResourceExhausted, { "retry-after": "1" });
    const a: Admitted = { source, bytes, rated, handling: false, closed: false, released: false };
    admitted.set(req, a);
    reply.raw.once("close", () => {
      a.closed = true;
      if (!a.handling) release(a);
    });
  };
  const handle = async <T>(req: FastifyRequest, work: (a: Admitted) => Promise<T>): Promise<T> => {
    const a = admitted.get(req)!;
    a.handling = true;
    try {
      return await work(a);
    } finally {
      a.handling = false;
      if (a.closed) release(a);
    }
  };
  const answer = (reply: FastifyReply, source: WebhookSourceRow, result: Accepted) => {
    if (result.status === 202 && result.body.matched_triggers) observer.triggersMatched(source.tenantId, result.body.matched_triggers);
    return reply.status(result.status).send(result.body);
  };

  app.removeAllContentTypeParsers();

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

  app.addHook("onResponse", async (req, reply) => {
    const status = reply.statusCode;
    // A 429 past the rate limit is the tenant's queued-runs quota (accept).
    const outcome = status === 429 && admitted.get(req)?.rated ? "over_quota" : (OUTCOMES[status] ?? "error");
    observer.webhook(outcome, sources.get(req)?.tenantId);
  });

  await app.register(async (envelope) => {
    envelope.addContentTypeParser("application/json", { parseAs: "string", bodyLimit: maxBytes }, (_req, body, done) => {
      try {
        done(null, JSON.parse(body as string));
      } catch {
        done(new ConnectError("body: is not valid JSON", Code.InvalidArgument));
      }
    });

    envelope.addHook("onRequest", async (req, reply) => {
      const source = await ingestion.authenticate(first(req.headers["x-webhook-token"]));
      sources.set(req, source);
      noteTenant(req, { id: source.tenantId });
      await ingestion.admit(source);
      hold(req, reply, source, true);
    });

    envelope.post("/webhooks/events", { bodyLimit: maxBytes }, (req, reply) =>
      handle(req, async (a) => {
        const key = first(req.headers["idempotency-key"] ?? req.headers["webhook-id"]);
        return answer(reply, a.source, await deliveries.envelope(a.source, req.body, req.headers, key));
      }),
    );
  });

  await app.register(async (signed) => {
    // The raw bytes, which the signature covers; parsed only once verified.
    // GitHub may send its JSON as a form's `payload` field.
    const raw = (format: Delivery["format"]) => (_req: FastifyRequest, body: Buffer, done: (err: Error | null, body?: unknown) => void) =>
      done(null, { body, format } satisfies Omit<Delivery, "headers">);
    signed.addContentTypeParser("application/json", { parseAs: "buffer", bodyLimit: maxBytes }, raw("json"));
    signed.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "buffer", bodyLimit: maxBytes }, raw("form"));

    // Before the body is read: a declared length over the limit is refused
    // before anything is looked up; then the source the URL names (the bad
    // token's 401 unless it is an enabled signed source) and its tenant's
    // bytes in flight. The rate limit comes after the signature, so forged
    // deliveries cannot spend a source's budget.
    signed.addHook("onRequest", async (req: FastifyRequest<{ Params: { source_id: string } }>, reply) => {
      if (Number(req.headers["content-length"]) > maxBytes) return reply.status(TOO_LARGE.status).send({ error: TOO_LARGE.error, message: TOO_LARGE.message });
      const source = await deliveries.source(req.params.source_id);
      sources.set(req, source);
      noteTenant(req, { id: source.tenantId });
      hold(req, reply, source, false);
    });

    signed.post<{ Params: { source_id: string } }>("/webhooks/sources/:source_id", { bodyLimit: maxBytes }, (req, reply) =>
      handle(req, async (a) => {
        const delivery: Delivery = { ...(req.body as Omit<Delivery, "headers">), headers: req.headers };
        if (delivery.format === "form" && a.source.kind !== "github")
          return reply.status(415).send({ error: "unsupported_media_type", message: "Content-Type must be application/json" });
        deliveries.verify(a.source, delivery);
        await ingestion.admit(a.source);
        a.rated = true;
        return answer(reply, a.source, await deliveries.receive(a.source, delivery));
      }),
    );
  });
}
