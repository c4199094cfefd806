import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import type { ChatCompletionMessage, ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { OutboundBlockedError, ResponseTooLargeError, type FetchLike } from "../outbound/guarded-fetch.js";
import { clean, errorReason } from "../outbound/upstream-reason.js";
import { SpanKind } from "@opentelemetry/api";
import { UNRECORDED_TRIES, type CallTries } from "../../lib/call-tries.js";
import { inSpan } from "../../lib/tracing.js";
import { propagatingFetch } from "../outbound/trace-context.js";
import { secretRedactor } from "../../lib/secret-redaction.js";

// Why a model call failed, in words a run step can carry: `kind` is stable
// for programs; the message keeps the status and a short reason, never the
// provider's raw answer.
export const MODEL_ERROR_KINDS = [
  "model_unauthorized", // 401/403: the API key was refused
  "model_error", // any other error answer; 408, 409, 429 and 5xx are transient
  "model_timeout", // transient
  "model_unreachable", // connection refused, DNS, reset: transient
  "outbound_blocked", // base_url resolves to an address the service may not call
] as const;

export type ModelErrorKind = (typeof MODEL_ERROR_KINDS)[number];

export class ModelError extends Error {
  override name = "ModelError";

  constructor(
    readonly kind: ModelErrorKind,
    readonly detail: string,
    readonly transient = false,
    readonly retryAfterMs?: number,
  ) {
    super(`${kind}: ${detail}`);
  }
}

export interface ModelEndpoint {
  baseUrl: string;
  apiKey: string;
  model: string;
}

export interface ChatRequest {
  messages: ChatCompletionMessageParam[];
  tools: ChatCompletionTool[];
}

export interface ChatModel {
  // One chat completion; transient failures are retried within the signal's
  // time, each failed try reported to `tries`, which waits out the backoff.
  complete(endpoint: ModelEndpoint, request: ChatRequest, signal: AbortSignal, tries?: CallTries, observe?: ObserveTry): Promise<ChatCompletionMessage>;
}

// Told of every try as it ends (metrics): `ok` or the error's kind, its
// seconds, and the tokens the provider counted.
export type ObserveTry = (outcome: string, seconds: number, tokens?: { prompt: number; completion: number }) => void;

export interface ChatModelOptions {
  // The outbound guard: the provider is a URL a tenant chose.
  fetch: FetchLike;
  backoffMs?: number[];
}

const MAX_RETRY_AFTER_MS = 10_000;
const TRANSIENT_STATUS = (status: number) => status === 408 || status === 409 || status === 429 || status >= 500;

function causes(err: unknown): Error[] {
  const chain: Error[] = [];
  for (let e = err; e instanceof Error && chain.length < 5; e = e.cause) chain.push(e);
  return chain;
}

function retryAfter(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get("retry-after-ms") ?? NaN);
  const seconds = Number(headers?.get("retry-after") ?? NaN);
  const wait = Number.isFinite(ms) ? ms : seconds * 1000;
  return Number.isFinite(wait) && wait >= 0 && wait <= MAX_RETRY_AFTER_MS ? wait : undefined;
}

// Errors of the openai client, and of the guarded fetch beneath it, as
// kinds, without the API key: a run's error is read by every viewer of the
// tenant and logged, and a provider may quote the key it refused, our own
// header check the key it could not send.
function toModelError(err: unknown, origin: string, redact: (text: string) => string): ModelError {
  const e = classify(err, origin, redact);
  const detail = redact(e.detail);
  return detail === e.detail ? e : new ModelError(e.kind, detail, e.transient, e.retryAfterMs);
}

function classify(err: unknown, origin: string, redact: (text: string) => string): ModelError {
  if (err instanceof ModelError) return err;
  const chain = causes(err);
  const blocked = chain.find((e) => e instanceof OutboundBlockedError);
  if (blocked) return new ModelError("outbound_blocked", blocked.message);
  const tooLarge = chain.find((e) => e instanceof ResponseTooLargeError);
  if (tooLarge) return new ModelError("model_error", `${origin}: ${tooLarge.message}`);
  if (err instanceof APIConnectionTimeoutError) return new ModelError("model_timeout", `${origin} did not answer in time`, true);
  if (err instanceof APIConnectionError) {
    const code = chain.map((e) => (e as { code?: unknown }).code).find((c) => typeof c === "string");
    return new ModelError("model_unreachable", `could not reach ${origin}${code ? ` (${String(code)})` : ""}`, true);
  }
  if (err instanceof APIError && err.status) {
    // `error` is the parsed JSON body's `error` member; a body that is not
    // JSON (an HTML error page, a proxy's text) leaves it undefined.
    const reason = errorReason(err.error, redact);
    const message = `${origin} answered HTTP ${err.status}${reason ? ` (${reason})` : ""}`;
    if (err.status === 401 || err.status === 403) return new ModelError("model_unauthorized", message);
    return new ModelError("model_error", message, TRANSIENT_STATUS(err.status), retryAfter(err.headers));
  }
  // V8's JSON errors quote the text they could not parse.
  if (err instanceof SyntaxError) return new ModelError("model_error", `${origin} answered with a body that is not JSON`);
  // Redacted before clean() may cut a key in two.
  return new ModelError("model_error", clean(redact((err as Error).message ?? String(err))));
}

// Model providers through the OpenAI client, over the guarded fetch. The
// client's own retries are off so that a refused address is not tried again
// and every failure gets a kind here.
export function createChatModel({ fetch, backoffMs = [500, 2000] }: ChatModelOptions): ChatModel {
  return {
    async complete(endpoint, request, signal, tries = UNRECORDED_TRIES, observe = () => {}) {
      const url = new URL(endpoint.baseUrl);
      const origin = url.origin;
      const redact = secretRedactor([endpoint.apiKey, `Bearer ${endpoint.apiKey}`]);
      const client = new OpenAI({
        baseURL: endpoint.baseUrl,
        apiKey: endpoint.apiKey,
        maxRetries: 0,
        fetch: propagatingFetch(fetch) as never, // the client's Fetch type is the web fetch signature
        // Never the operator's OPENAI_* environment on a tenant's endpoint.
        organization: null,
        project: null,
        webhookSecret: null,
      });
      for (let attempt = 0; ; attempt++) {
        const started = performance.now();
        const took = () => (performance.now() - started) / 1000;
        try {
          // One span per try (GenAI conventions); the provider gets its traceparent.
          const completion = await inSpan(
            `chat ${endpoint.model}`,
            { kind: SpanKind.CLIENT, attributes: { "gen_ai.operation.name": "chat", "gen_ai.request.model": endpoint.model, "server.address": url.hostname } },
            async (span) => {
              await tries.ready(signal);
              const completion = await client.chat.completions.create(
                { model: endpoint.model, messages: request.messages, ...(request.tools.length ? { tools: request.tools } : {}) },
                { signal },
              );
              span.setAttributes({ "gen_ai.usage.input_tokens": completion.usage?.prompt_tokens, "gen_ai.usage.output_tokens": completion.usage?.completion_tokens });
              return completion;
            },
            (err) => (err instanceof APIUserAbortError || signal.aborted ? "cancelled" : toModelError(err, origin, redact).kind),
          );
          const reply = completion.choices?.[0]?.message;
          if (!reply) throw new ModelError("model_error", `${origin} answered without a choice`);
          const usage = completion.usage;
          observe("ok", took(), usage && { prompt: usage.prompt_tokens ?? 0, completion: usage.completion_tokens ?? 0 });
          return reply;
        } catch (err) {
          if (err instanceof APIUserAbortError || signal.aborted) throw signal.reason ?? err;
          const e = toModelError(err, origin, redact);
          observe(e.kind, took());
          if (!e.transient || attempt >= backoffMs.length) throw e;
          const delay = e.retryAfterMs ?? backoffMs[attempt]!;
          await tries.backoff(e.message, delay, signal);
          if (signal.aborted) throw signal.reason;
        }
      }
    },
  };
}
