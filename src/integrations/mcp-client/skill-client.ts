import { setMaxListeners } from "node:events";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { OutboundBlockedError, ResponseTooLargeError, type FetchLike } from "../outbound/guarded-fetch.js";
import { propagatingFetch } from "../outbound/trace-context.js";
import { clean, jsonReason } from "../outbound/upstream-reason.js";
import { authenticatedFetch, type LiveSkillAuth } from "./auth-fetch.js";
import { SkillError } from "./errors.js";

export interface SkillClientOptions {
  url: string;
  auth: LiveSkillAuth;
  fetch: FetchLike;
  callTimeoutMs: number;
  version: string;
}

// The SDK's HTTP errors quote the server's whole answer ("Error POSTing to
// endpoint: <body>"); kept are its step, the status, and a JSON reason or the
// SDK's own note on an unfollowed redirect.
function httpFailure(e: StreamableHTTPError): string {
  const text = e.message.replace(/^Streamable HTTP error: /, "");
  if (!e.code || e.code < 0) return clean(text);
  const [, step = text, detail = ""] = /^([^:]*): ([\s\S]*)$/.exec(text) ?? [];
  const reason = detail.startsWith("Redirect") ? clean(detail) : jsonReason(detail);
  return `${clean(step)}: HTTP ${e.code}${reason ? ` (${reason})` : ""}`;
}

// Any failure below the tool itself, as a SkillError with a kind.
function toSkillError(err: unknown): SkillError {
  if (err instanceof SkillError) return err;
  const e = err as Error & { code?: unknown; cause?: unknown };
  if (e instanceof OutboundBlockedError || e.cause instanceof OutboundBlockedError)
    return new SkillError("outbound_blocked", (e.cause instanceof OutboundBlockedError ? e.cause : e).message);
  // Wherever the SDK met it: thrown by the fetch, or erroring the body it read.
  for (let c: unknown = e, depth = 0; c instanceof Error && depth < 5; c = c.cause, depth++)
    if (c instanceof ResponseTooLargeError) return new SkillError("skill_response_too_large", c.message);
  if (e.name === "TimeoutError" || e.name === "AbortError" || e.code === -32001 /* SDK request timeout */)
    return new SkillError("skill_timeout", e.message);
  if (e instanceof StreamableHTTPError) {
    const status = e.code ?? 0;
    // 401 and 403 reach here only when the auth layer let them through.
    const kind = status >= 500 || status === 429 ? "skill_error" : status === 401 || status === 403 ? "skill_unauthorized" : "skill_rejected";
    return new SkillError(kind, httpFailure(e));
  }
  if (e.cause instanceof SkillError) return e.cause;
  if (e.message === "fetch failed" || /ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|socket/i.test(`${e.message} ${String(e.cause)}`))
    return new SkillError("skill_unreachable", `${e.message}${e.cause ? `: ${(e.cause as Error).message ?? e.cause}` : ""}`);
  // V8's JSON errors quote the text they could not parse.
  if (e instanceof SyntaxError) return new SkillError("skill_error", "the server's answer is not valid JSON");
  // JSON-RPC errors (McpError) carry the server's own message.
  return new SkillError("skill_error", clean(e.message));
}

// Where a tools/call carries its idempotency key (SPEC §5).
const IDEMPOTENCY_KEY_META = "agentplane/idempotency-key";

// Tool calls in flight on one client, by idempotency key: each call's own
// abort, for a response too large to read.
type CallsInFlight = Map<string, AbortController>;

// The idempotency key of a tools/call request body, if it is one.
function callKeyOf(body: unknown): string | undefined {
  if (typeof body !== "string" || !body.includes('"tools/call"')) return undefined;
  const key = (JSON.parse(body) as { params?: { _meta?: Record<string, unknown> } }).params?._meta?.[IDEMPOTENCY_KEY_META];
  return typeof key === "string" ? key : undefined;
}

// The guarded fetch errors a body past the size limit as it streams. The SDK
// gives a JSON body's error to the call, but an SSE stream's only to
// `onerror`, and the call would wait for its answer until the call timeout
// (then retried as a timeout): here the call is aborted with that error at once.
// Only SSE bodies are wrapped: a JSON body's error already reaches the call.
function abortingTooLarge(fetch: FetchLike, calls: CallsInFlight): FetchLike {
  return async (url, init) => {
    const res = await fetch(url, init);
    const streamed = res.status === 200 && res.body && res.headers.get("content-type")?.includes("text/event-stream");
    const call = streamed ? calls.get(callKeyOf(init?.body) ?? "") : undefined;
    if (!call || !res.body) return res;
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (err) {
          if (err instanceof ResponseTooLargeError) call.abort(err);
          controller.error(err);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

// The SDK's transport hands one signal, for the client's whole life, to every
// request, and each request in flight holds one listener on it until its
// answer closes (the skill-memory test checks that none stays). A pooled
// client with more than ten calls in flight would make Node print its
// "possible EventTarget memory leak" warning for what is no leak; the calls in
// flight are bounded by the runtime's concurrency.
function inFlightListeners(fetch: FetchLike): FetchLike {
  return (url, init) => {
    if (init?.signal) setMaxListeners(0, init.signal);
    return fetch(url, init);
  };
}

// One customer MCP server, through the MCP SDK client over Streamable HTTP.
export class SkillClient {
  private constructor(
    private readonly client: Client,
    private readonly callTimeoutMs: number,
    private readonly calls: CallsInFlight,
  ) {}

  static async connect(options: SkillClientOptions): Promise<SkillClient> {
    const client = new Client({ name: "agentplane", version: options.version });
    const calls: CallsInFlight = new Map();
    const transport = new StreamableHTTPClientTransport(new URL(options.url), {
      fetch: abortingTooLarge(authenticatedFetch(propagatingFetch(inFlightListeners(options.fetch)), options.auth), calls) as never, // the SDK's FetchLike is the web fetch signature
    });
    try {
      await client.connect(transport, { timeout: options.callTimeoutMs });
    } catch (err) {
      await client.close().catch(() => {});
      throw toSkillError(err);
    }
    return new SkillClient(client, options.callTimeoutMs, calls);
  }

  async listTools(): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    try {
      do {
        const page = await this.client.listTools(cursor ? { cursor } : {}, { timeout: this.callTimeoutMs });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
    } catch (err) {
      throw toSkillError(err);
    }
    return tools;
  }

  // The idempotency key goes in `_meta`, where MCP puts what is about a
  // request rather than the tool's input: a tool's schema never sees it.
  // The SDK gets a signal of the call's own: it listens on the signal it is
  // given and never stops, so the run's signal would keep every finished
  // call (its request and handlers) alive as long as the run, and on abort
  // send a cancellation for each of them.
  async callTool(name: string, args: Record<string, unknown>, idempotencyKey: string, signal?: AbortSignal): Promise<CallToolResult> {
    // Its own controller also lets a response past the size limit end this
    // call at once (abortingTooLarge finds it by the idempotency key).
    const own = new AbortController();
    const forward = () => own.abort(signal?.reason);
    if (signal?.aborted) forward();
    else signal?.addEventListener("abort", forward, { once: true });
    this.calls.set(idempotencyKey, own);
    try {
      const params = { name, arguments: args, _meta: { [IDEMPOTENCY_KEY_META]: idempotencyKey } };
      return (await this.client.callTool(params, undefined, { timeout: this.callTimeoutMs, signal: own.signal })) as CallToolResult;
    } catch (err) {
      throw toSkillError(own.signal.aborted && !signal?.aborted ? own.signal.reason : err);
    } finally {
      signal?.removeEventListener("abort", forward);
      if (this.calls.get(idempotencyKey) === own) this.calls.delete(idempotencyKey);
    }
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
