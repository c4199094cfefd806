import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Logger } from "pino";

export interface LoggedTenant {
  id: string;
  slug?: string;
}

// The tenant a request acted in, once the service authorized it (or the
// webhook source's): a surface notes it, the line names it.
const tenants = new WeakMap<FastifyRequest, LoggedTenant>();

export function noteTenant(req: FastifyRequest, tenant: LoggedTenant): void {
  tenants.set(req, tenant);
}

// Probes and scrapes come every few seconds from the orchestrator and
// Prometheus: logged at debug unless they fail, so the log is about traffic.
const PROBES = new Set(["/healthz", "/readyz", "/metrics"]);

export interface AccessLogOptions {
  log: Logger;
  // The webhook path knows only the source's tenant id; the slug comes from
  // a cache of tenant slugs when it has it.
  slugOf?: (tenantId: string) => string | undefined;
}

// One line per request when its response ends or the client goes away (a
// stream's line comes at its end, with its whole duration): method, route
// pattern, path without the query string (which may carry a token),
// status, duration, request id and tenant. Headers are never read here, so
// no credential can reach the line.
export function accessLog(app: FastifyInstance, { log, slugOf }: AccessLogOptions): void {
  app.addHook("onRequest", (req, reply, done) => {
    const start = performance.now();
    reply.raw.once("close", () => {
      const path = req.url.split("?", 1)[0]!;
      // No status when the client left before the response began.
      const status = reply.raw.headersSent ? reply.raw.statusCode : undefined;
      const level = PROBES.has(path) && (status ?? 0) < 500 ? "debug" : "info";
      if (!log.isLevelEnabled(level)) return;
      const tenant = tenants.get(req);
      log[level](
        {
          reqId: req.id,
          method: req.method,
          route: req.routeOptions.url ?? "(no route)",
          path,
          status,
          durationMs: Math.round((performance.now() - start) * 100) / 100,
          ...(reply.raw.writableFinished ? {} : { aborted: true }),
          ...(tenant && { tenant: tenant.id, tenantSlug: tenant.slug ?? slugOf?.(tenant.id) }),
        },
        "request",
      );
    });
    done();
  });
}
