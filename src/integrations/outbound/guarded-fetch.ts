import { lookup } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { Agent, fetch as undiciFetch } from "undici";
import type { AddressPolicy } from "./address-policy.js";

export class OutboundBlockedError extends Error {
  override name = "OutboundBlockedError";
}

export class ResponseTooLargeError extends Error {
  override name = "ResponseTooLargeError";
}

export interface GuardedFetchOptions {
  policy: AddressPolicy;
  maxResponseBytes: number;
  // Redirects followed for GET (each target checked like the first); never for POST.
  maxRedirects?: number;
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
      const refused = list.find((a) => !policy.permits(a.address));
      if (refused || list.length === 0)
        return callback(new OutboundBlockedError(`${hostname} resolves to ${refused?.address ?? "nothing"}, which is not allowed`), "", 0);
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

  return async function guardedFetch(input, init = {}) {
    let url = new URL(input.toString());
    const method = (init.method ?? "GET").toUpperCase();
    for (let hop = 0; ; hop++) {
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new OutboundBlockedError(`${url.protocol} URLs are not allowed`);
      const host = url.hostname.replace(/^\[|\]$/g, "");
      if (isIP(host) && !policy.permits(host)) throw new OutboundBlockedError(`${host} is not an allowed address`);
      const res = (await undiciFetch(url, {
        ...(init as object),
        redirect: "manual",
        dispatcher,
      } as Parameters<typeof undiciFetch>[1])) as unknown as Response; // undici's Response is the web Response
      const location = res.headers.get("location");
      if (res.status >= 300 && res.status < 400 && location && method === "GET" && hop < (options.maxRedirects ?? 3)) {
        await res.body?.cancel();
        url = new URL(location, url);
        continue;
      }
      return limited(res);
    }
  };
}
