import type { FastifyInstance } from "fastify";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "agentplane_" });
  const duration = new Histogram({
    name: "agentplane_http_request_duration_seconds",
    help: "HTTP request duration by route and status",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const requests = new Counter({
    name: "agentplane_http_requests_total",
    help: "HTTP requests by route and status",
    labelNames: ["method", "route", "status"] as const,
    registers: [registry],
  });
  // Tenant-authored expressions cut off by their budget or limits, by use
  // (trigger filter or step arguments) and reason.
  const expressionOverruns = new Counter({
    name: "agentplane_expression_overruns_total",
    help: "Tenant expressions stopped by their time budget, depth, size or memory limit",
    labelNames: ["use", "reason"] as const,
    registers: [registry],
  });
  const expressionEvaluations = new Counter({
    name: "agentplane_expression_evaluations_total",
    help: "Tenant expressions evaluated, by use and where: inline (bounded, within the tenant's share of the service thread) or in a sandbox process",
    labelNames: ["use", "where"] as const,
    registers: [registry],
  });
  const filterFailures = new Counter({
    name: "agentplane_trigger_filter_failures_total",
    help: "Trigger filter evaluations that did not match because the filter failed or was suspended",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
  return {
    registry,
    expressionOverruns,
    expressionEvaluations,
    filterFailures,
    // Server streams (Watch…) open in this process, read when scraped.
    openStreams(count: () => number) {
      new Gauge({
        name: "agentplane_streams_open",
        help: "Server streams (WatchRun, WatchRuns, WatchEvents) open in this process",
        registers: [registry],
        collect() {
          this.set(count());
        },
      });
    },
    // Labels use the route pattern, never the raw URL, to bound cardinality.
    instrument(app: FastifyInstance) {
      app.addHook("onResponse", async (req, reply) => {
        const labels = { method: req.method, route: req.routeOptions.url ?? "unmatched", status: String(reply.statusCode) };
        requests.inc(labels);
        duration.observe(labels, reply.elapsedTime / 1000);
      });
    },
  };
}
