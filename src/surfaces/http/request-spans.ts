// A server span for each API request (Connect, gRPC, REST, MCP, webhooks,
// the dev issuer), continuing the caller's trace when it sends a W3C
// `traceparent`. Made here rather than by an auto-instrumentation: one span
// per request at the one place every request passes, named by its route.
// With tracing off the API starts no span and the request goes on as is.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { context, isSpanContextValid, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { FastifyInstance, FastifyServerFactory } from "fastify";
import { ATTR, tracer } from "../../lib/tracing.js";

type Handler = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => void;

// Probes, scrapes and console files: no trace worth keeping, many requests.
const UNTRACED = /^\/(healthz|readyz|metrics|console)?(?:[/?]|$)/;

export function tracedServerFactory(factory: FastifyServerFactory): FastifyServerFactory {
  return (handler, options) => factory(traced(handler as Handler) as typeof handler, options);
}

function traced(handler: Handler): Handler {
  return (req, res) => {
    const url = req.url ?? "/";
    if (UNTRACED.test(url)) return handler(req, res);
    const parent = propagation.extract(ROOT_CONTEXT, req.headers);
    const method = req.method ?? "GET";
    const span = tracer().startSpan(
      method,
      { kind: SpanKind.SERVER, attributes: { "http.request.method": method, "url.path": url.split("?", 1)[0] } },
      parent,
    );
    if (!isSpanContextValid(span.spanContext())) return handler(req, res);
    res.once("close", () => {
      span.setAttribute("http.response.status_code", res.statusCode);
      // A server span fails on 5xx only: a 4xx is the caller's error (semantic conventions).
      if (res.statusCode >= 500) span.setAttribute(ATTR.errorType, String(res.statusCode)).setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    const ctx = trace.setSpan(parent, span);
    // Fastify reads the body and answers in the request's and response's
    // event handlers, which must run in the request's context too.
    context.bind(ctx, req);
    context.bind(ctx, res);
    context.with(ctx, () => handler(req, res));
  };
}

// Names each request's span by its route once Fastify has matched it.
export function nameSpansByRoute(server: FastifyInstance): void {
  server.addHook("onRequest", (req, _reply, done) => {
    const route = req.routeOptions.url;
    if (route) trace.getActiveSpan()?.updateName(`${req.method} ${route}`).setAttribute("http.route", route);
    done();
  });
}
