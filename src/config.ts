// Configuration from AGENTPLANE_* environment variables. Every variable is
// listed in the configuration table (docs/reference/configuration.md); keep the
// two in step.
import { existsSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import type { AuthConfig } from "./integrations/identity/index.js";
import { INTROSPECTION_DEFAULTS } from "./integrations/identity/introspection.js";
import { DEFAULT_OUTBOUND, type OutboundOptions } from "./integrations/outbound/outbound.js";
import { AddressPolicy } from "./integrations/outbound/address-policy.js";
import { DEFAULT_JSON_MAX_DEPTH, DEFAULT_QUOTAS, DEFAULT_SCHEDULE_MIN_INTERVAL_SECONDS, QUOTA_VARIABLES, type Quotas } from "./service/limits.js";
import { openFileLimit } from "./lib/open-file-limit.js";
import { DEFAULT_RECORD_LIMITS, type RecordLimits } from "./runtime/recordable.js";
import type { ConsoleSettings } from "./surfaces/console/console.js";
import { DATA_DIR, DATABASE_URL, DEFAULT_PORT, HOST, LOG_LEVEL, PORT, PUBLIC_URL, ROLE } from "./config-variables.js";
import { DEFAULT_HTTP_LIMITS, type HttpLimits } from "./surfaces/http/http-limits.js";
import { DEFAULT_STREAM_LIMITS, type StreamLimits } from "./service/streams.js";
import { DEFAULT_SIGNED_BODY_TIMEOUT_MS, DEFAULT_TENANT_INFLIGHT_BYTES } from "./surfaces/webhooks/inflight-bytes.js";

// What one `serve` process does: `api` the HTTP surfaces (runs are queued for
// other processes), `worker` executes runs and fires schedules, `all` both.
// (A member's role in a tenant is service/access.ts's `RoleName`.)
export type ServeRole = "api" | "worker" | "all";
const SERVE_ROLES: readonly ServeRole[] = ["api", "worker", "all"];

export interface Config extends StoreConfig {
  role: ServeRole;
  // Threads executing runs beside the HTTP thread (0: on the HTTP thread).
  workerThreads: number;
  host: string;
  port: number;
  publicUrl: string;
  secretKey?: string;
  auth: AuthConfig;
  // Unset: tenant control plane (Member rows). Set: the token claim of that
  // name must equal the selected tenant slug.
  tenantClaim?: string;
  metricsToken?: string;
  // A `tenant` label (the slug) on the tenant-scoped metrics.
  metricsTenantLabel: boolean;
  logLevel: string;
  // One log line per HTTP request (AGENTPLANE_ACCESS_LOG=off: none).
  accessLog: boolean;
  webhookMaxBytes: number;
  webhookRatePerSecond: number;
  webhookBurst: number;
  // Webhook body bytes one tenant may have in flight in one process.
  webhookTenantInflightBytes: number;
  // Time a signed delivery's body has to arrive once its headers are in.
  webhookSignedBodyTimeoutMs: number;
  // Deepest nesting of a webhook payload or run input.
  jsonMaxDepth: number;
  scheduleMinIntervalSeconds: number;
  quotas: Quotas;
  workerConcurrency: number;
  runLeaseMs: number;
  workerIdlePollMs: number;
  runMaxAttempts: number;
  // Caps on what a run records (runtime/recordable.ts).
  recordLimits: RecordLimits;
  // Issuers the platform MCP endpoint advertises (RFC 9728).
  mcpAuthorizationServers: string[];
  outbound: OutboundOptions;
  http: HttpLimits;
  streams: StreamLimits;
  expressions: ExpressionConfig;
  // Events and finished runs older than this many days are deleted (≥ 1: the
  // 24 h idempotency window lives in the events), this many rows a batch.
  retentionDays: number;
  retentionBatch: number;
  // The browser console's OAuth public client and what it requests.
  console: ConsoleSettings;
  // Set: traces are exported (OTEL_TRACES_EXPORTER=otlp); unset, no SDK starts.
  tracing?: TracingConfig;
}

// What the OpenTelemetry SDK reads itself (endpoint, headers, service name,
// resource attributes, sampler, batching) stays in the OTEL_* variables; this
// says that it is on, after the values it would silently ignore were checked.
export interface TracingConfig {
  exporter: "otlp";
}

const SAMPLERS = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"];

function parseTracing(env: Env, problems: string[]): TracingConfig | undefined {
  if (str(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return undefined;
  const exporter = str(env, "OTEL_TRACES_EXPORTER") ?? "none";
  if (exporter === "none") return undefined;
  if (exporter !== "otlp") {
    problems.push(`OTEL_TRACES_EXPORTER must be otlp or none, got "${exporter}"`);
    return undefined;
  }
  const protocol = str(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ?? str(env, "OTEL_EXPORTER_OTLP_PROTOCOL");
  if (protocol !== undefined && protocol !== "http/protobuf")
    problems.push(`OTEL_EXPORTER_OTLP_PROTOCOL (or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) must be http/protobuf, the exporter this service ships, got "${protocol}"`);
  for (const name of ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]) {
    const url = str(env, name);
    if (url !== undefined && !/^https?:\/\//i.test(url)) problems.push(`${name} must be an http(s) URL, got "${url}"`);
  }
  const sampler = str(env, "OTEL_TRACES_SAMPLER");
  if (sampler !== undefined && !SAMPLERS.includes(sampler)) problems.push(`OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(", ")}, got "${sampler}"`);
  const ratio = str(env, "OTEL_TRACES_SAMPLER_ARG");
  if (ratio !== undefined && sampler?.endsWith("traceidratio") && !(Number(ratio) >= 0 && Number(ratio) <= 1))
    problems.push(`OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got "${ratio}"`);
  return { exporter };
}

// Tenant-authored JSONata (trigger filters, step arguments): where it runs
// and its budgets.
export interface ExpressionConfig {
  workers: number;
  maxDepth: number;
  // Longest string, and largest JSON text, one evaluation may build.
  maxChars: number;
  memoryMb: number;
  // Service-thread time per tenant per second for bounded expressions (0: never inline).
  inlineMsPerSecond: number;
  filterBudgetMs: number;
  stepBudgetMs: number;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

type Env = Record<string, string | undefined>;

function onOff(env: Env, name: string, fallback: boolean, problems: string[]): boolean {
  const v = str(env, name);
  if (v === undefined) return fallback;
  if (v === "on" || v === "off") return v === "on";
  problems.push(`${name} must be on or off, got "${v}"`);
  return fallback;
}

function str(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

function int(env: Env, name: string, fallback: number, problems: string[]): number {
  const v = str(env, name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) {
    problems.push(`${name} must be a non-negative integer, got "${v}"`);
    return fallback;
  }
  return n;
}

function positiveInt(env: Env, name: string, fallback: number, problems: string[]): number {
  const n = int(env, name, fallback, problems);
  if (n < 1) problems.push(`${name} must be at least 1, got "${str(env, name)}"`);
  return n;
}

function required(env: Env, name: string, why: string, problems: string[]): string {
  const v = str(env, name);
  if (v === undefined) problems.push(`${name} is required ${why}`);
  return v ?? "";
}

function parseAuth(env: Env, problems: string[]): AuthConfig {
  const mode = str(env, "AGENTPLANE_AUTH_MODE");
  const clockToleranceSeconds = int(env, "AGENTPLANE_JWT_CLOCK_TOLERANCE_SECONDS", 60, problems);
  switch (mode) {
    case "jwt":
      return {
        mode,
        issuer: required(env, "AGENTPLANE_JWT_ISSUER", "with AGENTPLANE_AUTH_MODE=jwt", problems),
        audience: required(env, "AGENTPLANE_JWT_AUDIENCE", "with AGENTPLANE_AUTH_MODE=jwt", problems),
        jwksUrl: str(env, "AGENTPLANE_JWKS_URL"),
        algorithms: (str(env, "AGENTPLANE_JWT_ALGORITHMS") ?? "RS256,ES256,PS256").split(",").map((a) => a.trim()),
        clockToleranceSeconds,
      };
    case "introspection": {
      const clientId = str(env, "AGENTPLANE_INTROSPECTION_CLIENT_ID");
      const clientSecret = str(env, "AGENTPLANE_INTROSPECTION_CLIENT_SECRET");
      if ((clientId === undefined) !== (clientSecret === undefined))
        problems.push("AGENTPLANE_INTROSPECTION_CLIENT_ID and AGENTPLANE_INTROSPECTION_CLIENT_SECRET go together");
      return {
        mode,
        url: required(env, "AGENTPLANE_INTROSPECTION_URL", "with AGENTPLANE_AUTH_MODE=introspection", problems),
        clientId,
        clientSecret,
        bearer: str(env, "AGENTPLANE_INTROSPECTION_BEARER"),
        audience: str(env, "AGENTPLANE_INTROSPECTION_AUDIENCE"),
        cacheTtlSeconds: int(env, "AGENTPLANE_INTROSPECTION_CACHE_TTL_SECONDS", 60, problems),
        negativeCacheTtlSeconds: int(
          env,
          "AGENTPLANE_INTROSPECTION_NEGATIVE_CACHE_SECONDS",
          INTROSPECTION_DEFAULTS.negativeCacheTtlSeconds,
          problems,
        ),
        timeoutMs: int(env, "AGENTPLANE_INTROSPECTION_TIMEOUT_MS", 5000, problems),
        clockToleranceSeconds,
        maxConcurrent: positiveInt(env, "AGENTPLANE_INTROSPECTION_MAX_CONCURRENT", INTROSPECTION_DEFAULTS.maxConcurrent, problems),
        maxQueued: int(env, "AGENTPLANE_INTROSPECTION_MAX_QUEUED", INTROSPECTION_DEFAULTS.maxQueued, problems),
      };
    }
    case undefined:
      problems.push(
        "AGENTPLANE_AUTH_MODE is required: set it to 'jwt' (with AGENTPLANE_JWT_ISSUER and AGENTPLANE_JWT_AUDIENCE) " +
          "or 'introspection' (with AGENTPLANE_INTROSPECTION_URL). For local development run `agentplane dev` instead.",
      );
      return { mode: "dev", audience: "", clockToleranceSeconds };
    default:
      problems.push(`AGENTPLANE_AUTH_MODE must be 'jwt' or 'introspection', got "${mode}"`);
      return { mode: "dev", audience: "", clockToleranceSeconds };
  }
}

// File descriptors kept free of client connections: the database and its
// journal, skill and identity-provider connections, logs.
const RESERVED_FILE_DESCRIPTORS = 256;

// Past the process's open-file limit, accepting fails for every caller
// (health checks included) instead of only for connections over the cap.
function parseHttpLimits(env: Env, problems: string[]): HttpLimits {
  const fdLimit = openFileLimit();
  const connectionRoom = fdLimit === undefined ? undefined : fdLimit - RESERVED_FILE_DESCRIPTORS;
  const d = DEFAULT_HTTP_LIMITS;
  const limits: HttpLimits = {
    maxBodyBytes: positiveInt(env, "AGENTPLANE_HTTP_MAX_BODY_BYTES", d.maxBodyBytes, problems),
    maxHeaderBytes: positiveInt(env, "AGENTPLANE_HTTP_MAX_HEADER_BYTES", d.maxHeaderBytes, problems),
    headersTimeoutMs: positiveInt(env, "AGENTPLANE_HTTP_HEADERS_TIMEOUT_MS", d.headersTimeoutMs, problems),
    requestTimeoutMs: positiveInt(env, "AGENTPLANE_HTTP_REQUEST_TIMEOUT_MS", d.requestTimeoutMs, problems),
    idleTimeoutMs: positiveInt(env, "AGENTPLANE_HTTP_IDLE_TIMEOUT_MS", d.idleTimeoutMs, problems),
    maxConnections: positiveInt(
      env,
      "AGENTPLANE_HTTP_MAX_CONNECTIONS",
      Math.max(1, Math.min(d.maxConnections, connectionRoom ?? d.maxConnections)),
      problems,
    ),
  };
  if (limits.headersTimeoutMs > limits.requestTimeoutMs)
    problems.push("AGENTPLANE_HTTP_HEADERS_TIMEOUT_MS must not exceed AGENTPLANE_HTTP_REQUEST_TIMEOUT_MS (the headers are part of the request)");
  if (connectionRoom !== undefined && limits.maxConnections > connectionRoom)
    problems.push(
      `AGENTPLANE_HTTP_MAX_CONNECTIONS (${limits.maxConnections}) must leave ${RESERVED_FILE_DESCRIPTORS} of the process's ` +
        `${fdLimit} open files free: lower it to at most ${connectionRoom}, or raise the limit (ulimit -n)`,
    );
  return limits;
}

export interface LoadOptions {
  // `agentplane dev`: embedded issuer, loopback, generated secret key.
  dev?: boolean;
  // `serve --role`, ahead of AGENTPLANE_ROLE.
  role?: string;
}

// One core for HTTP and ingest, the others for executing runs.
const DEFAULT_WORKER_THREADS = Math.max(1, availableParallelism() - 1);

// Runs executing at once per worker thread, by default: 32 per core of the
// machine, shared by the threads (at least 8 each). A run mostly waits (on
// tools, models, the store), so a core keeps many busy, and a claim's size
// follows the free slots: too few leave a thread waiting on claims. Issue 20,
// bench/engine on 2 cores (one worker thread): 8 at a time ran 330-680 runs/s
// from a backlog; 32 drained 50,000 runs at 2,830 runs/s on PostgreSQL and
// fell behind a paced 2,500 events/s (2,087 runs/s); 64 drained 3,880, kept
// up (2,490 runs/s, none queued at the end) with a lower ack p99, and on
// SQLite drained 8,362 against 6,131.
export function defaultWorkerConcurrency(threads: number): number {
  return Math.max(8, Math.ceil((32 * availableParallelism()) / Math.max(1, threads)));
}

export interface StoreConfig {
  // postgres://…: PostgreSQL; unset: SQLite at sqlitePath.
  databaseUrl?: string;
  databasePoolSize: number;
  dataDir: string;
  sqlitePath: string;
  sqliteSynchronous: "FULL" | "NORMAL";
  ingestBatchWindowMs: number;
  ingestBatchMax: number;
}

function parseQuotas(env: Env, problems: string[]): Quotas {
  return Object.fromEntries(
    Object.entries(QUOTA_VARIABLES).map(([kind, name]) => [kind, int(env, name, DEFAULT_QUOTAS[kind as keyof Quotas], problems)]),
  ) as unknown as Quotas; // every key of QUOTA_VARIABLES is a key of Quotas
}

// The per-tenant quotas alone, for the operator CLI, which needs no auth
// configuration but must keep the same caps as the service.
export function loadQuotas(env: Env = process.env): Quotas {
  const problems: string[] = [];
  const quotas = parseQuotas(env, problems);
  if (problems.length) throw new ConfigError(problems.join("; "));
  return quotas;
}

// What the store commands (`migrate`, `tenant create`, …) need: no auth.
export function loadStoreConfig(env: Env = process.env): StoreConfig {
  const dataDir = resolve(str(env, DATA_DIR.name) ?? "data");
  const synchronous = (str(env, "AGENTPLANE_SQLITE_SYNCHRONOUS") ?? "FULL").toUpperCase();
  if (synchronous !== "FULL" && synchronous !== "NORMAL")
    throw new ConfigError(`AGENTPLANE_SQLITE_SYNCHRONOUS must be FULL or NORMAL, got "${synchronous}"`);
  const problems: string[] = [];
  const ingestBatchWindowMs = int(env, "AGENTPLANE_INGEST_BATCH_WINDOW_MS", 0, problems);
  const ingestBatchMax = positiveInt(env, "AGENTPLANE_INGEST_BATCH_MAX", 256, problems);
  const databaseUrl = str(env, DATABASE_URL.name);
  // Never echoed: the URL may carry a password.
  if (databaseUrl !== undefined && (!/^postgres(ql)?:\/\/./i.test(databaseUrl) || !URL.canParse(databaseUrl)))
    problems.push("AGENTPLANE_DATABASE_URL must be a postgres:// or postgresql:// URL (unset: SQLite at AGENTPLANE_SQLITE_PATH)");
  const databasePoolSize = positiveInt(env, "AGENTPLANE_DATABASE_POOL_SIZE", 10, problems);
  if (problems.length) throw new ConfigError(problems.join("; "));
  return {
    databaseUrl,
    databasePoolSize,
    dataDir,
    sqlitePath: str(env, "AGENTPLANE_SQLITE_PATH") ?? join(dataDir, "agentplane.db"),
    sqliteSynchronous: synchronous,
    ingestBatchWindowMs,
    ingestBatchMax,
  };
}

// AGENTPLANE_PUBLIC_URL without its trailing slashes; unset, this machine at
// the port (`agentplane dev` listens on 127.0.0.1).
function publicUrlOf(env: Env, port: number, dev: boolean): string {
  return (str(env, PUBLIC_URL.name) ?? `http://${dev ? "127.0.0.1" : "localhost"}:${port}`).replace(/\/+$/, "");
}

// What an operator command that seals a secret or prints a URL needs of the
// service's settings: the key it seals with (AGENTPLANE_SECRET_KEY, else the
// one `agentplane dev` keeps in the data directory) and its public URL.
export function loadOperatorSettings(env: Env = process.env): { secretKey?: string; publicUrl: string } {
  const problems: string[] = [];
  const port = int(env, PORT.name, DEFAULT_PORT, problems);
  let secretKey = str(env, "AGENTPLANE_SECRET_KEY");
  const devKeyFile = join(loadStoreConfig(env).dataDir, "secret.key");
  const dev = secretKey === undefined && existsSync(devKeyFile);
  if (dev) secretKey = readFileSync(devKeyFile, "utf8").trim();
  if (secretKey !== undefined && Buffer.from(secretKey, "base64").length !== 32)
    problems.push("AGENTPLANE_SECRET_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32)");
  if (problems.length) throw new ConfigError(problems.join("; "));
  return { secretKey, publicUrl: publicUrlOf(env, port, dev) };
}

const DEFAULT_CONSOLE_SCOPES = "openid platform:read platform:write";
// The public client the dev issuer registers for the console.
const DEV_CONSOLE_CLIENT_ID = "agentplane-console";

// The console logs in where the API's tokens come from, for the API's
// audience, unless told otherwise.
function parseConsole(env: Env, auth: AuthConfig, publicUrl: string): ConsoleSettings {
  const issuer = auth.mode === "jwt" ? auth.issuer : auth.mode === "dev" ? publicUrl : "";
  const audience = auth.mode === "introspection" ? (auth.audience ?? "") : auth.audience;
  return {
    clientId: str(env, "AGENTPLANE_CONSOLE_CLIENT_ID") ?? (auth.mode === "dev" ? DEV_CONSOLE_CLIENT_ID : ""),
    issuer: str(env, "AGENTPLANE_CONSOLE_ISSUER") ?? issuer,
    audience: str(env, "AGENTPLANE_CONSOLE_AUDIENCE") ?? audience,
    scopes: str(env, "AGENTPLANE_CONSOLE_SCOPES") ?? DEFAULT_CONSOLE_SCOPES,
  };
}

// `agentplane dev` may call loopback by default, so an MCP server started on
// the same machine works as a skill; `serve` allows nothing unless told.
// Setting AGENTPLANE_OUTBOUND_ALLOW replaces this default in `dev` too.
const DEV_OUTBOUND_ALLOW: readonly string[] = ["127.0.0.0/8", "::1/128"];

export function loadConfig(env: Env = process.env, options: LoadOptions = {}): Config {
  const problems: string[] = [];
  const port = int(env, PORT.name, DEFAULT_PORT, problems);
  const host = str(env, HOST.name) ?? (options.dev ? "127.0.0.1" : "0.0.0.0");
  let storeConfig: StoreConfig | undefined;
  try {
    storeConfig = loadStoreConfig(env);
  } catch (err) {
    problems.push((err as Error).message);
  }
  const publicUrl = publicUrlOf(env, port, options.dev ?? false);
  const auth: AuthConfig = options.dev
    ? {
        mode: "dev",
        audience: str(env, "AGENTPLANE_JWT_AUDIENCE") ?? publicUrl,
        clockToleranceSeconds: int(env, "AGENTPLANE_JWT_CLOCK_TOLERANCE_SECONDS", 60, problems),
      }
    : parseAuth(env, problems);
  const secretKey = str(env, "AGENTPLANE_SECRET_KEY");
  if (secretKey !== undefined && Buffer.from(secretKey, "base64").length !== 32)
    problems.push("AGENTPLANE_SECRET_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32)");
  if (!options.dev && secretKey === undefined)
    problems.push("AGENTPLANE_SECRET_KEY is required: 32 bytes, base64-encoded (openssl rand -base64 32)");
  const expressions: ExpressionConfig = {
    workers: positiveInt(env, "AGENTPLANE_EXPRESSION_WORKERS", 2, problems),
    maxDepth: positiveInt(env, "AGENTPLANE_EXPRESSION_MAX_DEPTH", 500, problems),
    maxChars: positiveInt(env, "AGENTPLANE_EXPRESSION_MAX_CHARS", 4_194_304, problems),
    memoryMb: positiveInt(env, "AGENTPLANE_EXPRESSION_MEMORY_MB", 128, problems),
    inlineMsPerSecond: int(env, "AGENTPLANE_EXPRESSION_INLINE_MS_PER_SECOND", 250, problems),
    filterBudgetMs: positiveInt(env, "AGENTPLANE_FILTER_BUDGET_MS", 50, problems),
    stepBudgetMs: positiveInt(env, "AGENTPLANE_STEP_EXPRESSION_BUDGET_MS", 1000, problems),
  };
  const role = options.role ?? str(env, ROLE.name) ?? "all";
  if (!(SERVE_ROLES as readonly string[]).includes(role))
    problems.push(`AGENTPLANE_ROLE (or --role) must be ${SERVE_ROLES.slice(0, -1).join(", ")} or ${SERVE_ROLES.at(-1)}, got "${role}"`);
  const workerThreads = int(env, "AGENTPLANE_WORKER_THREADS", DEFAULT_WORKER_THREADS, problems);
  const config: Config = {
    role: role as ServeRole, // checked above; a problem stops the load
    workerThreads,
    host,
    port,
    publicUrl,
    ...storeConfig!,
    secretKey,
    auth,
    tenantClaim: str(env, "AGENTPLANE_TENANT_CLAIM"),
    metricsToken: str(env, "AGENTPLANE_METRICS_TOKEN"),
    metricsTenantLabel: onOff(env, "AGENTPLANE_METRICS_TENANT_LABEL", false, problems),
    logLevel: str(env, LOG_LEVEL.name) ?? "info",
    accessLog: onOff(env, "AGENTPLANE_ACCESS_LOG", true, problems),
    webhookMaxBytes: int(env, "AGENTPLANE_WEBHOOK_MAX_BYTES", 1024 * 1024, problems),
    webhookRatePerSecond: positiveInt(env, "AGENTPLANE_WEBHOOK_RATE_PER_SECOND", 100, problems),
    webhookBurst: positiveInt(env, "AGENTPLANE_WEBHOOK_BURST", 200, problems),
    webhookTenantInflightBytes: positiveInt(env, "AGENTPLANE_WEBHOOK_TENANT_INFLIGHT_BYTES", DEFAULT_TENANT_INFLIGHT_BYTES, problems),
    webhookSignedBodyTimeoutMs: positiveInt(env, "AGENTPLANE_WEBHOOK_SIGNED_BODY_TIMEOUT_MS", DEFAULT_SIGNED_BODY_TIMEOUT_MS, problems),
    jsonMaxDepth: positiveInt(env, "AGENTPLANE_WEBHOOK_MAX_DEPTH", DEFAULT_JSON_MAX_DEPTH, problems),
    scheduleMinIntervalSeconds: positiveInt(env, "AGENTPLANE_SCHEDULE_MIN_INTERVAL_SECONDS", DEFAULT_SCHEDULE_MIN_INTERVAL_SECONDS, problems),
    quotas: parseQuotas(env, problems),
    workerConcurrency: positiveInt(env, "AGENTPLANE_WORKER_CONCURRENCY", defaultWorkerConcurrency(workerThreads), problems),
    runLeaseMs: int(env, "AGENTPLANE_RUN_LEASE_SECONDS", 30, problems) * 1000,
    workerIdlePollMs: positiveInt(env, "AGENTPLANE_WORKER_IDLE_POLL_SECONDS", 5, problems) * 1000,
    runMaxAttempts: positiveInt(env, "AGENTPLANE_RUN_MAX_ATTEMPTS", 3, problems),
    recordLimits: {
      stepArgumentsBytes: positiveInt(env, "AGENTPLANE_RUN_STEP_ARGUMENTS_MAX_BYTES", DEFAULT_RECORD_LIMITS.stepArgumentsBytes, problems),
      stepResultBytes: positiveInt(env, "AGENTPLANE_RUN_STEP_RESULT_MAX_BYTES", DEFAULT_RECORD_LIMITS.stepResultBytes, problems),
      outputBytes: positiveInt(env, "AGENTPLANE_RUN_OUTPUT_MAX_BYTES", DEFAULT_RECORD_LIMITS.outputBytes, problems),
      runRecordBytes: positiveInt(env, "AGENTPLANE_RUN_RECORD_MAX_BYTES", DEFAULT_RECORD_LIMITS.runRecordBytes, problems),
      errorChars: positiveInt(env, "AGENTPLANE_RUN_ERROR_MAX_CHARS", DEFAULT_RECORD_LIMITS.errorChars, problems),
    },
    mcpAuthorizationServers:
      str(env, "AGENTPLANE_MCP_AUTHORIZATION_SERVERS")?.split(",").map((s) => s.trim()).filter(Boolean) ??
      (auth.mode === "jwt" ? [auth.issuer] : auth.mode === "dev" ? [publicUrl] : []),
    outbound: {
      allow: str(env, "AGENTPLANE_OUTBOUND_ALLOW")?.split(",").map((s) => s.trim()).filter(Boolean) ?? (options.dev ? [...DEV_OUTBOUND_ALLOW] : []),
      discoveryTimeoutMs: int(env, "AGENTPLANE_SKILL_DISCOVERY_TIMEOUT_MS", DEFAULT_OUTBOUND.discoveryTimeoutMs, problems),
      callTimeoutMs: int(env, "AGENTPLANE_SKILL_CALL_TIMEOUT_MS", DEFAULT_OUTBOUND.callTimeoutMs, problems),
      maxResponseBytes: int(env, "AGENTPLANE_SKILL_MAX_RESPONSE_BYTES", DEFAULT_OUTBOUND.maxResponseBytes, problems),
    },
    expressions,
    http: parseHttpLimits(env, problems),
    streams: {
      ...DEFAULT_STREAM_LIMITS,
      idleMs: positiveInt(env, "AGENTPLANE_STREAM_IDLE_SECONDS", DEFAULT_STREAM_LIMITS.idleMs / 1000, problems) * 1000,
      maxLifeMs: positiveInt(env, "AGENTPLANE_STREAM_MAX_SECONDS", DEFAULT_STREAM_LIMITS.maxLifeMs / 1000, problems) * 1000,
      maxPerCaller: positiveInt(env, "AGENTPLANE_STREAM_MAX_PER_CALLER", DEFAULT_STREAM_LIMITS.maxPerCaller, problems),
    },
    retentionDays: positiveInt(env, "AGENTPLANE_RETENTION_DAYS", 30, problems),
    retentionBatch: positiveInt(env, "AGENTPLANE_RETENTION_BATCH", 500, problems),
    console: parseConsole(env, auth, publicUrl),
    tracing: parseTracing(env, problems),
  };
  try {
    new AddressPolicy(config.outbound.allow);
  } catch (err) {
    problems.push(`AGENTPLANE_OUTBOUND_ALLOW: ${(err as Error).message}`);
  }
  if (problems.length) throw new ConfigError("invalid configuration:\n  - " + problems.join("\n  - "));
  return config;
}
