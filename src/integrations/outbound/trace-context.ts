import { context, propagation } from "@opentelemetry/api";
import type { FetchLike } from "./guarded-fetch.js";

// Adds the W3C trace context of the current span (`traceparent`, and
// `tracestate` when the trace has one) to each request, so that a customer's
// MCP server or a model provider can join the run's trace. With tracing off
// the API's propagator injects nothing and the request goes out unchanged.
// The guard drops these headers on a redirect to another origin, like any
// header it does not know to be safe there.
export function propagatingFetch(fetch: FetchLike): FetchLike {
  return (url, init) => {
    const carrier: Record<string, string> = {};
    propagation.inject(context.active(), carrier);
    if (carrier.traceparent === undefined) return fetch(url, init);
    const headers = new Headers(init?.headers);
    for (const [name, value] of Object.entries(carrier)) headers.set(name, value);
    return fetch(url, { ...init, headers });
  };
}
