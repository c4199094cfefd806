import type { FetchLike } from "./guarded-fetch.js";

// What undici reports when a connection broke with no answer begun: most
// often a kept-alive socket the peer closed (its keep-alive timeout ran out,
// or its timers fired late) just as our request went out on it, which the
// peer never read. ECONNREFUSED is not here: nothing is listening, and an
// immediate second try would meet the same closed port.
const UNANSWERED = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

// undici wraps the socket's error: `TypeError: fetch failed` whose cause
// (or the cause's cause) carries the code. Not `instanceof Error`: Node's
// own fetch throws from its realm, which is not the caller's in a VM context.
function brokeUnanswered(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; typeof e === "object" && e !== null && depth < 4; depth++) {
    const { code, cause } = e as { code?: unknown; cause?: unknown };
    if (typeof code === "string" && UNANSWERED.has(code)) return true;
    e = cause;
  }
  return false;
}

// A body fetch can send a second time: a stream is consumed by the first.
export type ResendableInit = Omit<RequestInit, "body"> & { body?: string | URLSearchParams };

// Sends the request once more, at once, when its connection broke before any
// answer. Only for requests that may be repeated (the peer may have acted on
// the first before the connection broke): undici does not resend a request it
// has written, and a POST is not idempotent to it. A response that began is
// returned as it is (fetch resolves on its headers; a body that breaks later
// is the caller's to read). A caller's abort or timeout is never overridden,
// and the second try shares its signal, so the deadline stays the caller's.
export async function fetchRetryingReset(fetch: FetchLike, url: string | URL, init: ResendableInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    if (init.signal?.aborted || !brokeUnanswered(err)) throw err;
    return fetch(url, init);
  }
}
