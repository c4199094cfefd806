import { lookup } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { Agent, fetch as undiciFetch } from "undici";
import type { AddressPolicy } from "./address-policy.js";

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

// A fetch for customer-controlled URLs. The check happens in the connection's
// own DNS lookup, so the socket connects to exactly the addresses that were
// checked (no second resolution to rebind); literal IPs are checked up front.
export function createGuardedFetch(options: GuardedFetchOptions): FetchLike {
  const { policy } = options;
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

  const limited = (res: Response): Response => {
    const length = res.headers.get("content-length");
    const declared = Number(length ?? "0");
    if (declared > options.maxResponseBytes) throw new ResponseTooLargeError(`response of ${declared} bytes is over the limit`);
    // A declared length bounds an unencoded body (HTTP framing); only bodies
    // of unknown or encoded length are counted as they stream.
    if (!res.body || (length !== null && !res.headers.has("content-encoding"))) return res;
    let seen = 0;
    const counter = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > options.maxResponseBytes) controller.error(new ResponseTooLargeError("response is over the size limit"));
        else controller.enqueue(chunk);
      },
    });
    return new Response(res.body.pipeThrough(counter), { status: res.status, statusText: res.statusText, headers: res.headers });
  };

  // Redirects are followed here, never by undici, so that every hop is
  // checked and credentials stay with the origin they were meant for.
  return async function guardedFetch(input, init = {}) {
    let url = new URL(input.toString());
    const method = (init.method ?? "GET").toUpperCase();
    const mode = init.redirect ?? "follow";
    let headers = new Headers(init.headers);
    for (let hop = 0; ; hop++) {
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new OutboundBlockedError(`${url.protocol} URLs are not allowed`);
      // WHATWG URL parsing already turned 2130706433, 0x7f.1 and 127.1 into 127.0.0.1.
      const host = url.hostname.replace(/^\[|\]$/g, "");
      const refusal = isIP(host) ? policy.check(host) : undefined;
      if (refusal) throw addressRefused(refusal);
      const res = (await undiciFetch(url, {
        ...(init as object),
        headers: Object.fromEntries(headers),
        redirect: "manual",
        dispatcher,
      } as Parameters<typeof undiciFetch>[1])) as unknown as Response; // undici's Response is the web Response
      const location = res.status >= 300 && res.status < 400 ? res.headers.get("location") : null;
      if (location === null || mode === "manual") return limited(res);
      const next = URL.canParse(location, url.href) ? new URL(location, url) : undefined;
      if (mode === "error") {
        await res.body?.cancel();
        throw new RedirectRefusedError(`${url.origin} answered HTTP ${res.status} redirecting to ${next?.origin ?? "an invalid location"}; redirects are not followed for this request`);
      }
      if (!next || (method !== "GET" && method !== "HEAD") || hop >= (options.maxRedirects ?? 3)) return limited(res);
      await res.body?.cancel();
      if (next.origin !== url.origin) headers = forOrigin(headers);
      url = next;
    }
  };
}
