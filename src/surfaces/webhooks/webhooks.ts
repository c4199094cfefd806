import { PassThrough } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { FairTurns } from "../../lib/fair-turns.js";
import { NO_OBSERVER, type Observer, type WebhookOutcome } from "../../lib/observer.js";
import type { Accepted, WebhookIngestion, WebhookSource } from "../../service/webhooks.js";
import type { Delivery, WebhookDeliveries } from "../../service/webhook-deliveries.js";
import { retryLater } from "../../service/errors.js";
import { noteTenant } from "../http/access-log.js";
import { bodyRefusal, errorAnswer, type BodyRefusal } from "../http/errors.js";
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
  // Time a signed delivery's body has to arrive once its headers are in;
  // past it, 408 and the connection is closed.
  signedBodyTimeoutMs: number;
}

// A request of a known source: the bytes it holds of its tenant's share
// (none until it is admitted) until it is answered and its handler is done.
interface Admitted {
  source: WebhookSource;
  // Aborted when the connection closes before the answer is out: the
  // sender went away, and the work left for its event is not done.
  gone: AbortController;
  bytes: number;
  // Past the source's rate limit too: a 429 now is the queued-runs quota.
  rated: boolean;
  handling: boolean;
  closed: boolean;
}

// A signed delivery's body still arriving after `signedBodyTimeoutMs`.
class BodyTimeout extends Error {
  readonly code = "WEBHOOK_BODY_TIMEOUT";
  readonly statusCode = 408;
}

// What each answer means for the sender; 429 is the rate limit until the
// source was admitted, the queued-runs quota after.
const OUTCOMES: Record<number, WebhookOutcome> = {
  202: "accepted",
  200: "duplicate",
  400: "invalid",
  401: "unauthenticated",
  408: "timed_out",
  413: "too_large",
  415: "unsupported_media_type",
  429: "rate_limited",
  503: "unavailable",
};

// Fastify's refusals of a body (`bodyRefusal`), in the webhook error shape.
const BODY_REFUSALS: Partial<Record<BodyRefusal["kind"], { error: string; message: string }>> = {
  media_type: { error: "unsupported_media_type", message: "Content-Type must be application/json" },
  too_large: { error: "payload_too_large", message: "body is larger than the limit" },
  empty: { error: "invalid_argument", message: "body: is empty" },
  length: { error: "invalid_argument", message: "Content-Length does not match the body" },
};

const TOO_LARGE = BODY_REFUSALS.too_large!;

// A webhook's fixed cost in turns, in body bytes: what its headers, lookups
// and answer take however small its body.
const REQUEST_COST = 1024;

const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

// POST /webhooks/events: the token is checked (and the source's rate limit
// taken) before the body is read, so unauthenticated senders cost nothing;
// the body limit is enforced while streaming, chunked bodies included.
// POST /webhooks/sources/{id}: a signed kind's delivery, whose signature can
// only be checked on the whole body (its scope below says in which order).
export async function webhookSurface(
  app: FastifyInstance,
  { ingestion, deliveries, maxBytes, tenantInflightBytes, signedBodyTimeoutMs, observer = NO_OBSERVER }: WebhookSurfaceOptions,
): Promise<void> {
  // The source of every authenticated request (its tenant labels the outcome).
  const sources = new WeakMap<FastifyRequest, WebhookSource>();
  // Requests of a known source, and the tenant's bytes in flight they hold.
  const admitted = new WeakMap<FastifyRequest, Admitted>();
  const inflight = new InflightBytes(tenantInflightBytes);
  // The HTTP thread's time for an event's parsing, validation and matching
  // (up to its first wait for anything else: a sandboxed filter or mapping,
  // a lookup the cache misses), shared between tenants by body bytes plus
  // what any request costs (fair-turns.ts): a tenant with many large events
  // in flight no longer puts all of them ahead of another's next one.
  const turns = new FairTurns();
  // A turn per known request, taken once it may be processed. A sender that
  // leaves while it waits gives its place up, and nothing of its work is done.
  const turn = async (a: Admitted, bytes: number) => {
    await turns.turn(a.source.tenantId, REQUEST_COST + bytes, a.gone.signal).catch(() => {
      throw new ConnectError("the sender went away before the event was stored", Code.Canceled);
    });
  };
  const release = (a: Admitted) => {
    if (!a.bytes) return;
    inflight.give(a.source.tenantId, a.bytes);
    a.bytes = 0;
  };

  // Follows the request of a known source from now until the answer is out
  // (or the connection gone) and the handler is done: a sender that hangs
  // up after its body still holds its share while that body is processed.
  const track = (req: FastifyRequest, reply: FastifyReply, source: WebhookSource): Admitted => {
    const a: Admitted = { source, gone: new AbortController(), bytes: 0, rated: false, handling: false, closed: reply.raw.destroyed };
    admitted.set(req, a);
    reply.raw.once("close", () => {
      a.closed = true;
      if (!reply.raw.writableFinished) a.gone.abort();
      if (!a.handling) release(a);
    });
    return a;
  };
  // Takes `bytes` of the tenant's share for the request, or refuses it (429).
  const charge = (a: Admitted, bytes: number): void => {
    if (!inflight.take(a.source.tenantId, bytes))
      throw retryLater("this tenant has too many webhook bytes in flight; retry later", 1);
    a.bytes = bytes;
    if (a.closed && !a.handling) release(a);
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
  // 202 for a stored event, 200 for a duplicate: the sender may stop either way.
  const answer = (reply: FastifyReply, source: WebhookSource, result: Accepted) => {
    if (result.duplicate) return reply.status(200).send({ event_id: result.eventId, duplicate: true });
    if (result.matchedTriggers) observer.triggersMatched(source.tenantId, result.matchedTriggers);
    return reply.status(202).send({ event_id: result.eventId, matched_triggers: result.matchedTriggers });
  };

  app.removeAllContentTypeParsers();

  app.setErrorHandler((err: FastifyError | ConnectError | BodyTimeout, _req, reply) => {
    if (err instanceof BodyTimeout) return reply.status(408).send({ error: "deadline_exceeded", message: err.message });
    const refused = bodyRefusal(err);
    if (refused) return reply.status(refused.status).send(BODY_REFUSALS[refused.kind] ?? { error: codeToString(refused.code), message: refused.message });
    const answer = errorAnswer(err);
    if (answer.unexpected) app.log.error({ err }, "webhook ingestion failed");
    return reply.status(answer.status).headers(answer.headers).send({ error: answer.name, message: answer.message });
  });

  app.addHook("onResponse", async (req, reply) => {
    const status = reply.statusCode;
    // A 429 past the rate limit is the tenant's queued-runs quota (accept).
    const outcome = status === 429 && admitted.get(req)?.rated ? "over_quota" : (OUTCOMES[status] ?? "error");
    observer.webhook(outcome, sources.get(req)?.tenantId);
  });

  await app.register(async (envelope) => {
    // Parsed in the tenant's turn (below).
    envelope.addContentTypeParser("application/json", { parseAs: "string", bodyLimit: maxBytes }, (_req, body, done) => done(null, body));

    envelope.addHook("onRequest", async (req, reply) => {
      const source = await ingestion.authenticate(first(req.headers["x-webhook-token"]));
      sources.set(req, source);
      noteTenant(req, { id: source.tenantId });
      const a = track(req, reply, source);
      await ingestion.admit(source);
      // Authenticated: its declared length (a chunked body: the limit) is
      // charged before the body is read.
      const declared = Number(req.headers["content-length"]);
      charge(a, Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, maxBytes) : maxBytes);
      a.rated = true;
    });

    envelope.post("/webhooks/events", { bodyLimit: maxBytes }, (req, reply) =>
      handle(req, async (a) => {
        const key = first(req.headers["idempotency-key"] ?? req.headers["webhook-id"]);
        // No body at all (and no Content-Type) reaches here as undefined:
        // accept answers it as any body that is not an object.
        let body = req.body;
        if (typeof body === "string") {
          await turn(a, Buffer.byteLength(body));
          try {
            body = JSON.parse(body);
          } catch {
            throw new ConnectError("body: is not valid JSON", Code.InvalidArgument);
          }
        }
        return answer(reply, a.source, await deliveries.envelope(a.source, body, req.headers, key, a.gone.signal));
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
    // token's 401 unless it is an enabled signed source). Nothing the sender
    // does before its signature is checked is charged to the tenant: the
    // unverified body holds only its own connection, for at most
    // `signedBodyTimeoutMs`, so a stranger who knows the URL cannot spend
    // the tenant's bytes in flight. The verified body's length is charged
    // then, and the rate limit taken after that, so forged deliveries cannot
    // spend the source's budget either.
    signed.addHook("onRequest", async (req: FastifyRequest<{ Params: { source_id: string } }>, reply) => {
      if (Number(req.headers["content-length"]) > maxBytes) return reply.status(413).send(TOO_LARGE);
      const source = await deliveries.source(req.params.source_id);
      sources.set(req, source);
      noteTenant(req, { id: source.tenantId });
      track(req, reply, source);
    });

    // The body as it arrives, cut off with a 408 when it is not all in on time.
    signed.addHook("preParsing", async (_req, reply, payload) => {
      const bounded = new PassThrough();
      // Nobody reads it when the answer came first (415): its error must not
      // be an unhandled one.
      bounded.on("error", () => {});
      const timer = setTimeout(() => {
        payload.unpipe(bounded);
        bounded.destroy(new BodyTimeout(`the body of a signed delivery must arrive within ${signedBodyTimeoutMs} ms`));
      }, signedBodyTimeoutMs);
      const done = () => clearTimeout(timer);
      payload.once("end", done).once("close", done);
      reply.raw.once("close", done);
      payload.once("error", (err) => {
        done();
        bounded.destroy(err);
      });
      return payload.pipe(bounded);
    });

    signed.post<{ Params: { source_id: string } }>("/webhooks/sources/:source_id", { bodyLimit: maxBytes }, (req, reply) =>
      handle(req, async (a) => {
        const delivery: Delivery = { ...(req.body as Omit<Delivery, "headers">), headers: req.headers };
        if (delivery.format === "form" && a.source.kind !== "github")
          return reply.status(415).send({ error: "unsupported_media_type", message: "Content-Type must be application/json" });
        deliveries.verify(a.source, delivery);
        charge(a, delivery.body.length);
        await ingestion.admit(a.source);
        a.rated = true;
        await turn(a, delivery.body.length);
        return answer(reply, a.source, await deliveries.receive(a.source, delivery, a.gone.signal));
      }),
    );
  });
}
