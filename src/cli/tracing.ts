// The OpenTelemetry SDK of a process or runtime thread, started only when
// OTEL_TRACES_EXPORTER=otlp: with tracing off none of it is even loaded, and
// the spans of src/lib/tracing.ts stay the API's no-ops. Each runtime thread
// starts its own (a provider is per thread); they export to the same
// collector, and a run's spans join the trace stored with the run.
import { diag, DiagLogLevel } from "@opentelemetry/api";
import type { Logger } from "pino";
import type { TracingConfig } from "../config.js";
import { VERSION } from "../version.js";

export interface Tracing {
  // Exports what is still batched, then stops.
  shutdown(): Promise<void>;
}

export async function startTracing(config: TracingConfig | undefined, log: Logger): Promise<Tracing | undefined> {
  if (!config) return undefined;
  // These packages are CommonJS: `default` is their exports, both under
  // Node's loader and in the bundle (scripts/bundle.ts), whose chunk for a
  // dynamically imported CommonJS module exports nothing else.
  const [{ NodeTracerProvider }, { BatchSpanProcessor }, { OTLPTraceExporter }, { W3CTraceContextPropagator }, resources] = await Promise.all([
    import("@opentelemetry/sdk-trace-node").then((m) => m.default),
    import("@opentelemetry/sdk-trace-base").then((m) => m.default),
    import("@opentelemetry/exporter-trace-otlp-proto").then((m) => m.default),
    import("@opentelemetry/core").then((m) => m.default),
    import("@opentelemetry/resources").then((m) => m.default),
  ]);
  // The SDK's own troubles (a collector that does not answer) as log lines.
  diag.setLogger(
    {
      error: (message, ...args) => log.warn({ args }, `tracing: ${message}`),
      warn: (message, ...args) => log.warn({ args }, `tracing: ${message}`),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    DiagLogLevel.WARN,
  );
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) win over the defaults.
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ "service.name": "agentplane", "service.version": VERSION }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  // The exporter reads OTEL_EXPORTER_OTLP_*, the batch OTEL_BSP_*, the provider OTEL_TRACES_SAMPLER*.
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
  // W3C trace context only: no baggage is taken from callers or passed on to
  // customers' servers.
  provider.register({ propagator: new W3CTraceContextPropagator() });
  return { shutdown: () => provider.shutdown() };
}
