import type { FastifyInstance } from "fastify";
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from "prom-client";
import { createDomainMetrics } from "./domain-metrics.js";
import type { Observer } from "./lib/observer.js";
import type { Store } from "./store/store.js";

type Snapshot = MetricObjectWithValues<MetricValue<string>>[];

export interface MetricsOptions {
  // A `tenant` label (the slug) on the tenant-scoped series.
  tenantLabel?: boolean;
  // How long the queue's depth and age are reused between scrapes.
  queueCacheMs?: number;
}

const QUEUE_CACHE_MS = 5_000;
// Tenant slugs kept for relabelling; past this many the map starts again.
const MAX_SLUGS = 100_000;

export type Metrics = ReturnType<typeof createMetrics>;

// Two registries: this thread's own series (process, HTTP, streams, filter
// failures), and the domain series, which the runtime threads also keep and
// which are summed with theirs when scraped.
export function createMetrics(options: MetricsOptions = {}) {
  const tenantLabel = options.tenantLabel ?? false;
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
  const filterFailures = new Counter({
    name: "agentplane_trigger_filter_failures_total",
    help: "Trigger filter evaluations that did not match because the filter failed or was suspended",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
  const domain = new Registry();
  const observer: Observer = createDomainMetrics(domain, tenantLabel);
  let threads: () => Promise<unknown[]> = () => Promise.resolve([]);
  let slugs: ((ids: string[]) => Promise<Map<string, string>>) | undefined;

  // The domain series of this thread and every runtime thread, tenant ids
  // turned into slugs.
  async function domainExposition(): Promise<string> {
    const all = [await domain.getMetricsAsJSON(), ...((await threads()) as Snapshot[])];
    if (all.length === 1 && !tenantLabel) return domain.metrics();
    return AggregatorRegistry.aggregate(tenantLabel && slugs ? await relabel(all, slugs) : all).metrics();
  }

  return {
    registry,
    observer,
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
    // The runtime threads' domain series, asked for at each scrape.
    fromThreads(snapshots: () => Promise<unknown[]>) {
      threads = snapshots;
    },
    // Queue depth and age, read from the store at most every few seconds
    // however often /metrics is scraped; tenant slugs for the tenant label.
    readStore(store: Store) {
      const cacheMs = options.queueCacheMs ?? QUEUE_CACHE_MS;
      let cached: { at: number; stats: Promise<{ tenantId: string; queued: number; oldestCreateTime: number }[]> } | undefined;
      const stats = () => {
        const now = Date.now();
        if (!cached || now - cached.at >= cacheMs) {
          const pending = store.runs.queueStats();
          cached = { at: now, stats: pending };
          // A failed read is not reused.
          pending.catch(() => {
            if (cached?.stats === pending) cached = undefined;
          });
        }
        return cached.stats;
      };
      const t = tenantLabel ? ["tenant"] : [];
      // Each gauge awaits the same cached read, so both describe one moment.
      const gauge = (name: string, help: string, value: (r: { queued: number; oldestCreateTime: number }, now: number) => number, total: (values: number[]) => number) =>
        new Gauge({
          name,
          help,
          labelNames: t,
          registers: [domain],
          async collect() {
            this.reset();
            let rows;
            try {
              rows = await stats();
            } catch {
              return; // the store is unavailable: no value rather than a wrong one
            }
            const now = Date.now();
            if (tenantLabel) for (const r of rows) this.set({ tenant: r.tenantId }, value(r, now));
            else this.set(total(rows.map((r) => value(r, now))));
          },
        });
      gauge("agentplane_runs_queued", "Runs waiting to be claimed, in the whole store", (r) => r.queued, (v) => v.reduce((a, b) => a + b, 0));
      gauge(
        "agentplane_runs_queued_oldest_age_seconds",
        "Age of the oldest run waiting to be claimed (0 when none waits)",
        (r, now) => Math.max(0, (now - r.oldestCreateTime) / 1000),
        (v) => Math.max(0, ...v),
      );
      const known = new Map<string, string>();
      slugs = async (ids) => {
        const unknown = ids.filter((id) => !known.has(id));
        if (known.size + unknown.length > MAX_SLUGS) known.clear();
        await Promise.all(
          unknown.map(async (id) => {
            const tenant = await store.tenants.get(id).catch(() => undefined);
            if (tenant?.id === id) known.set(id, tenant.slug);
          }),
        );
        return known;
      };
    },
    // Labels use the route pattern, never the raw URL, to bound cardinality.
    // Counted when the response closes, not on Fastify's onResponse: that
    // waits for the response to finish, which a stream whose client went
    // away (how a console tab's streams end) never does. A request left
    // before its response began has the status "aborted".
    instrument(app: FastifyInstance) {
      app.addHook("onRequest", (req, reply, done) => {
        reply.raw.once("close", () => {
          const status = reply.raw.headersSent ? String(reply.raw.statusCode) : "aborted";
          const labels = { method: req.method, route: req.routeOptions.url ?? "unmatched", status };
          requests.inc(labels);
          duration.observe(labels, reply.elapsedTime / 1000);
        });
        done();
      });
    },
    // What GET /metrics answers.
    exposition: {
      contentType: registry.contentType,
      async metrics(): Promise<string> {
        const [own, merged] = await Promise.all([registry.metrics(), domainExposition()]);
        return `${own.trimEnd()}\n${merged}`;
      },
    },
  };
}

// Tenant ids (stable, known where events happen) become slugs (what
// operators read) only here; an id whose tenant is gone stays an id.
async function relabel(all: Snapshot[], slugs: (ids: string[]) => Promise<Map<string, string>>): Promise<Snapshot[]> {
  const ids = new Set<string>();
  for (const metrics of all) for (const m of metrics) for (const v of m.values) if (v.labels.tenant) ids.add(String(v.labels.tenant));
  if (!ids.size) return all;
  const known = await slugs([...ids]);
  return all.map((metrics) =>
    metrics.map((m) => ({
      ...m,
      values: m.values.map((v) => (v.labels.tenant ? { ...v, labels: { ...v.labels, tenant: known.get(String(v.labels.tenant)) ?? v.labels.tenant } } : v)),
    })),
  );
}
