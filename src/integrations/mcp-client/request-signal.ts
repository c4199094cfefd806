import type { FetchLike } from "../outbound/guarded-fetch.js";

// Each request gets an abort signal of its own, following the caller's only
// until its response body is read, cancelled or fails. The MCP SDK's
// transport passes one signal to every request for as long as the client
// lives, and undici attaches a listener to the signal of each request that
// only a finalizer removes, after a full garbage collection: a pooled client
// carried thousands of them between collections.
export function requestSignals(fetch: FetchLike): FetchLike {
  return async (url, init = {}) => {
    const outer = init.signal;
    if (!outer) return fetch(url, init);
    const own = new AbortController();
    const forward = () => own.abort(outer.reason);
    const unlink = () => outer.removeEventListener("abort", forward);
    if (outer.aborted) forward();
    else outer.addEventListener("abort", forward, { once: true });
    let res: Response;
    try {
      res = await fetch(url, { ...init, signal: own.signal });
    } catch (err) {
      unlink();
      throw err;
    }
    if (!res.body) {
      unlink();
      return res;
    }
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            unlink();
            controller.close();
          } else controller.enqueue(value);
        } catch (err) {
          unlink();
          controller.error(err);
        }
      },
      cancel(reason) {
        unlink();
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
