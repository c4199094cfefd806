import { lookup } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { pipeline, type Readable, type Transform } from "node:stream";
import zlib from "node:zlib";
import { Agent, request, type Dispatcher } from "undici";
import type { AddressPolicy } from "./address-policy.js";
import { VERSION } from "../../version.js";
import { webBody } from "./web-body.js";

export class OutboundBlockedError extends Error {
  override name = "OutboundBlockedError";
}

// Says which address was refused and how an operator would permit it.
const addressRefused = (refusal: string) =>
  new OutboundBlockedError(`${refusal}; the service does not connect there unless AGENTPLANE_OUTBOUND_ALLOW permits it`);

export class ResponseTooLargeError extends Error {
  override name = "ResponseTooLargeError";
}

// A redirect the caller asked not to follow (`redirect: "error"`).
class RedirectRefusedError extends Error {
  override name = "RedirectRefusedError";
}

export interface GuardedFetchOptions {
  policy: AddressPolicy;
  maxResponseBytes: number;
  // Redirects followed for GET and HEAD (each target checked like the first);
  // never for other methods, whose 3xx answers are returned as they are.
  maxRedirects?: number;
}

// Headers that may go on to another origin: nothing that identifies or
// authorizes the caller (the Fetch standard drops Authorization; we also drop
// cookies, proxy credentials and any custom header, which may hold an API key).
const CROSS_ORIGIN_SAFE = new Set(["accept", "accept-language", "content-language", "content-type", "user-agent", "mcp-protocol-version", "last-event-id"]);

function forOrigin(headers: Headers): Headers {
  const kept = new Headers();
  for (const [name, value] of new Headers(headers)) if (CROSS_ORIGIN_SAFE.has(name)) kept.set(name, value);
  return kept;
}

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

const USER_AGENT = `agentplane/${VERSION}`;

// RFC 9110's reason-phrase: tab, space, visible ASCII and obs-text.
const REASON_PHRASE = /^[\t\x20-\x7e\x80-\xff]*$/;

// Statuses whose responses have no body (the Response constructor refuses one).
const NULL_BODY = new Set([204, 205, 304]);

// The body of a request, as undici's request API takes it, with the
// content type fetch would give it. Customer-facing callers send JSON text
// (MCP, model providers) and forms (token requests); nothing else is needed.
function requestBody(body: RequestInit["body"], headers: Headers): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  const typed = (type: string) => {
    if (!headers.has("content-type")) headers.set("content-type", type);
  };
  if (typeof body === "string") {
    typed("text/plain;charset=UTF-8");
    return body;
  }
  if (body instanceof URLSearchParams) {
    typed("application/x-www-form-urlencoded;charset=UTF-8");
    return body.toString();
  }
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  throw new TypeError("the outbound fetch sends text, form or byte bodies only");
}

// A decoder for the content coding fetch would decode; none for identity, a
// list of codings or one it does not know (the body is then given as sent).
function decoderFor(coding: string | undefined): Transform | undefined {
  const flush = { flush: zlib.Z_SYNC_FLUSH, finishFlush: zlib.Z_SYNC_FLUSH };
  switch (coding?.trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return zlib.createGunzip(flush);
    case "deflate":
      return zlib.createInflate(flush);
    case "br":
      return zlib.createBrotliDecompress();
    default:
      return undefined;
  }
}

// A body not read: its connection closed. Destroyed without a reason, undici's
// body emits an abort error, which nobody else listens for.
function discard(body: Readable): void {
  body.on("error", () => {});
  body.destroy();
}

function headersOf(raw: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.append(name, value);
  }
  return headers;
}

// A fetch for customer-controlled URLs. The check happens in the connection's
// own DNS lookup, so the socket connects to exactly the addresses that were
// checked (no second resolution to rebind); literal IPs are checked up front.
//
// Built on undici's request API rather than its fetch: a skill call through
// fetch cost about 400 µs of CPU against 125 µs here (web streams and the
// spec's request machinery per call; bench/README, "Skill calls on the runtime
// thread"). What callers rely on is kept: a web Response resolved at the
// headers whose body streams, the caller's signal (its reason as the error),
// network failures as `TypeError: fetch failed` with the cause, gzip,
// deflate and br bodies decoded, and the size limit counted on decoded bytes.
export function createGuardedFetch(options: GuardedFetchOptions): FetchLike {
  const { policy, maxResponseBytes } = options;
  const guardedLookup: LookupFunction = (hostname, lookupOptions, callback) => {
    lookup(hostname, { ...lookupOptions, all: true }, (err, addresses) => {
      if (err) return callback(err, "", 0);
      const list = addresses as unknown as { address: string; family: number }[]; // all: true yields a list
      if (list.length === 0) return callback(new OutboundBlockedError(`${hostname} resolves to no address`), "", 0);
      for (const { address } of list) {
        const refusal = policy.check(address);
        if (refusal) return callback(addressRefused(`${hostname} resolves to ${address}; ${refusal}`), "", 0);
      }
      if (lookupOptions.all) return (callback as unknown as (e: null, a: typeof list) => void)(null, list); // the `all` overload
      callback(null, list[0]!.address, list[0]!.family);
    });
  };
  const dispatcher = new Agent({ connect: { lookup: guardedLookup } });

  // One hop: the request sent, its answer as a web Response.
  async function send(url: URL, method: string, headers: Headers, body: string | Uint8Array | undefined, signal: AbortSignal | null | undefined): Promise<Response> {
    let answer: Dispatcher.ResponseData;
    try {
      answer = await request(url, { method: method as Dispatcher.HttpMethod, headers: Object.fromEntries(headers), body, signal: signal ?? undefined, dispatcher });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw new TypeError("fetch failed", { cause: err });
    }
    const { statusCode: status } = answer;
    // The Response constructor refuses a reason phrase a lenient parser let
    // through (control characters); the status is what callers read.
    const statusText = REASON_PHRASE.test(answer.statusText) ? answer.statusText : "";
    const responseHeaders = headersOf(answer.headers);
    if (status < 200 || status > 599) {
      discard(answer.body);
      throw new TypeError("fetch failed", { cause: new Error(`the server answered with status ${status}`) });
    }
    if (method === "HEAD" || NULL_BODY.has(status)) {
      // Read to its (empty) end, so the connection is kept.
      void answer.body.dump().catch(() => {});
      return new Response(null, { status, statusText, headers: responseHeaders });
    }
    const declared = Number(responseHeaders.get("content-length") ?? "0");
    if (declared > maxResponseBytes) {
      discard(answer.body);
      throw new ResponseTooLargeError(`response of ${declared} bytes is over the limit`);
    }
    // Counted as the caller will read it, decoded: a small compressed body
    // may decode to far more than the limit.
    const decoder = decoderFor(responseHeaders.get("content-encoding") ?? undefined);
    const stream: Readable = decoder ? pipeline(answer.body, decoder, () => {}) : answer.body;
    const decoded = webBody(stream, maxResponseBytes, () => new ResponseTooLargeError("response is over the size limit"));
    return new Response(decoded, { status, statusText, headers: responseHeaders });
  }

  // Redirects are followed here, never by undici, so that every hop is
  // checked and credentials stay with the origin they were meant for.
  return async function guardedFetch(input, init = {}) {
    let url = new URL(input.toString());
    const method = (init.method ?? "GET").toUpperCase();
    const mode = init.redirect ?? "follow";
    let headers = new Headers(init.headers);
    // fetch's defaults (kept on a hop to another origin): some servers'
    // firewalls refuse a request without a user agent.
    if (!headers.has("accept")) headers.set("accept", "*/*");
    if (!headers.has("user-agent")) headers.set("user-agent", USER_AGENT);
    const body = requestBody(init.body, headers);
    for (let hop = 0; ; hop++) {
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new OutboundBlockedError(`${url.protocol} URLs are not allowed`);
      // WHATWG URL parsing already turned 2130706433, 0x7f.1 and 127.1 into 127.0.0.1.
      const host = url.hostname.replace(/^\[|\]$/g, "");
      const refusal = isIP(host) ? policy.check(host) : undefined;
      if (refusal) throw addressRefused(refusal);
      const res = await send(url, method, headers, body, init.signal);
      const location = res.status >= 300 && res.status < 400 ? res.headers.get("location") : null;
      if (location === null || mode === "manual") return res;
      const next = URL.canParse(location, url.href) ? new URL(location, url) : undefined;
      if (mode === "error") {
        await res.body?.cancel();
        throw new RedirectRefusedError(`${url.origin} answered HTTP ${res.status} redirecting to ${next?.origin ?? "an invalid location"}; redirects are not followed for this request`);
      }
      if (!next || (method !== "GET" && method !== "HEAD") || hop >= (options.maxRedirects ?? 3)) return res;
      await res.body?.cancel();
      if (next.origin !== url.origin) headers = forOrigin(headers);
      url = next;
    }
  };
}
