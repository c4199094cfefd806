// Webhook ingestion capacity: POST /webhooks/events against two baselines,
// and in other modes against the number of triggers, of tenants sending,
// tracing, signed deliveries.
//
// Four servers run side by side in this process:
//   (a) a bare Fastify 5 route that parses the JSON body and answers 202;
//   (b) a bare Fastify 5 route that does one better-sqlite3 insert per request
//       (its own transaction, so one WAL fsync per request) and answers 202;
//   agentplane twice, built with buildApp on its SQLite store, once with the
//       default group commit (window 0 ms: what arrived in one event-loop turn
//       commits together) and once with a 2 ms window.
// Every database is a temporary file with journal_mode WAL and
// synchronous=FULL. Each target's capacity is the highest rate an open-loop
// paced generator, in a process of its own, offers it with every request
// answered 202 within the p99 objective (../lib/capacity.ts); the same ~1 KiB
// event each time, and the capacity ratios are reported against the targets
// "agentplane >= 60% of (a)" and "agentplane above (b)". Afterwards the
// databases are checked: one stored event per request answered, one queued
// run per event.
//
// `triggers` mode: agentplane alone, once per tenant size of TRIGGER_COUNTS
// webhook triggers on the source, of which only `order.*` matches the event
// (the others: exact types, `*` and `**` patterns that do not); each size's
// capacity is reported as a ratio to the one-trigger run.
//
// `tenants` mode: agentplane twice, one tenant sending and a hundred (each
// request to the next tenant's source); the hundred's capacity as a ratio to
// the one's. BENCH_ENGINE=postgres puts both on PostgreSQL (a database each,
// created on AGENTPLANE_BENCH_POSTGRES_URL and dropped after).
//
// `tracing` mode: agentplane alone, with tracing off (no SDK, as by default)
// and on (the SDK as `serve` starts it for OTEL_TRACES_EXPORTER=otlp, every
// request sampled unless OTEL_TRACES_SAMPLER says otherwise, OTLP/HTTP to a
// sink in a child process) in alternating
// searches on the same server; on's capacity is reported as a ratio to off's.
//
// `signed` mode: agentplane twice, one server receiving the event through
// an envelope source (`POST /webhooks/events`, X-Webhook-Token) and one
// through a Standard Webhooks source (`POST /webhooks/sources/{id}`, each
// request signed by the load generator with a new webhook-id; the same
// triggers on it); the signed capacity is reported as a ratio to the
// envelope's.
//
// Every agentplane request carries a new Idempotency-Key, as real senders'
// do. The bench reports; it does not fail on a missed target, nor on a step
// whose requests were not all answered 202 (that step fails), only on a
// failed preflight, warm-up or database check.
import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import type { IncomingMessage, Server } from "node:http";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import Database from "better-sqlite3";
import Fastify, { type FastifyInstance } from "fastify";
import { AgentSchema } from "../../gen/platform/v1/agent_pb.js";
import { WebhookSourceKind } from "../../gen/platform/v1/webhook_source_pb.js";
import {
  CreateAgentRequestSchema,
  CreateTenantRequestSchema,
  CreateTriggerRequestSchema,
  CreateWebhookSourceRequestSchema,
} from "../../gen/platform/v1/platform_service_pb.js";
import { context, diag, propagation, trace } from "@opentelemetry/api";
import pino from "pino";
import postgres from "postgres";
import { buildApp, type App } from "../../src/app.js";
import { startTracing, type Tracing } from "../../src/cli/tracing.js";
import { newId } from "../../src/lib/ids.js";
import { DEFAULT_QUOTAS } from "../../src/service/limits.js";
import type { Authenticator, Principal } from "../../src/integrations/identity/index.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import { createLogger } from "../../src/log.js";
import { createPostgresStore } from "../../src/store/postgres/store.js";
import { createSqliteStore } from "../../src/store/sqlite/store.js";
import type { GroupCommitOptions } from "../../src/store/group-commit.js";
import type { Store } from "../../src/store/store.js";
import {
  capacitySettingsFromEnv,
  compareCapacities,
  describeCapacity,
  printCapacityTable,
  ratioOf,
  type CapacitySummary,
  type CapacityTarget,
} from "../lib/capacity.js";
import { positiveInt } from "../lib/env.js";
import { BENCH_POSTGRES_HOST, freshDatabase } from "../lib/postgres.js";
import { describeHost, ownChild, removeScratchDir, runBench, scratchDir } from "../lib/run.js";

const TENANT = "bench";
// Signs each request of the `signed` mode (compiled next to this file).
const SIGN_STANDARD_WEBHOOKS = fileURLToPath(new URL("./sign-standard-webhooks.cjs", import.meta.url));
// Spreads the `tenants` mode's requests over the tenants' sources.
const ROTATE_TOKENS = fileURLToPath(new URL("./rotate-tokens.cjs", import.meta.url));
type Signer = (request: { headers: Record<string, string>; body: string }) => { headers: Record<string, string> };
const WEBHOOK_PATH = "/webhooks/events";
const EVENT_TYPE = "order.created";
const MATCHING_PATTERN = "order.*";
// A typical filter: navigation and comparisons, so it runs inline under its
// time slice (the expression budget's cost on the hot path).
const MATCHING_FILTER = "payload.total > 100 and payload.customer.tier = 'gold'";
const NON_MATCHING_TRIGGERS = 9;
const WARMUP_SECONDS = 3;
const TARGET_VS_BARE = 0.6;
const TARGET_VS_SQLITE = 1.0;
// Triggers mode: webhook triggers in the tenant (one matching), and the share
// of the one-trigger rate the largest must keep.
const TRIGGER_COUNTS = [1, 100, 1_000, 10_000];
const TARGET_VS_ONE_TRIGGER = 0.8;
// Tenants mode: tenants sending at once, and the share of one tenant's rate
// the many must keep (issue 20).
const TENANT_COUNTS = [1, 100];
const TARGET_VS_ONE_TENANT = 0.8;
const TENANTS_ENGINE = ((engine = process.env.BENCH_ENGINE || "sqlite") => {
  if (engine !== "sqlite" && engine !== "postgres") throw new Error(`BENCH_ENGINE: "sqlite" or "postgres", got "${engine}"`);
  return engine;
})();
// The generator puts a new id in place of this in every request.
const NEW_ID = "[<id>]";
// The warm-up step, per target: paced, not judged on latency.
const WARMUP_RATE = 1000;
// Each store target keeps the one event its preflight posted.
const PREFLIGHT_ROWS = 1;

// An order-created event of about 1 KiB once serialized.
function eventBody(): string {
  const lines = [
    { sku: "KB-101", name: "Mechanical keyboard, brown switches", quantity: 1, unit_price: 89.9 },
    { sku: "MS-220", name: "Wireless mouse, graphite", quantity: 2, unit_price: 24.5 },
    { sku: "CB-USB-C-2M", name: "USB-C cable, braided, 2 m", quantity: 3, unit_price: 9.99 },
  ];
  return JSON.stringify({
    event_type: EVENT_TYPE,
    payload: {
      order_id: "ord_01J9ZK6T3M4Q8R2W5X7Y9B1C3D",
      created_at: "2025-03-14T09:26:53.589Z",
      currency: "EUR",
      total: 168.87,
      customer: {
        id: "cus_8f14e45fceea167a5a36dedd4bea2543",
        email: "jane.doe@example.com",
        name: "Jane Doe",
        tier: "gold",
      },
      shipping: {
        method: "express",
        address: { line1: "12 Rue des Lilas", city: "Lyon", postal_code: "69003", country: "FR" },
      },
      billing: { line1: "12 Rue des Lilas", city: "Lyon", postal_code: "69003", country: "FR", vat_id: "FR40303265045" },
      payment: { method: "card", brand: "visa", last4: "4242", status: "authorized", intent: "pi_3OqZ8e2eZvKYlo2C1x9" },
      lines,
      tags: ["web", "promo-spring", "first-order"],
      notes: "Leave the parcel with the concierge if nobody answers; the customer works from home on Fridays.",
    },
  });
}

// A server under load. `received` counts requests to the measured route seen
// by the Node HTTP server since `startCounting` (a `request` listener, on
// every target alike): checked against what the generator sent and saw
// answered (checkStore).
interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  // The body posted, when not the run's own; the CommonJS module that
  // rewrites each request (signed deliveries, tokens in turn), and what it
  // reads from the environment.
  body?: string;
  rewrite?: string;
  env?: Record<string, string>;
  received: () => number;
  startCounting: () => void;
  // Rows the target stored (agentplane: events; (b): inserts).
  stored?: () => number | Promise<number>;
  close: () => Promise<void>;
}

function requestCounter(server: Server, path: string) {
  let counting = false;
  let n = 0;
  server.on("request", (req: IncomingMessage) => {
    if (counting && req.method === "POST" && req.url === path) n++;
  });
  return {
    received: () => n,
    startCounting: () => {
      counting = true;
      n = 0;
    },
  };
}

async function listen(server: FastifyInstance): Promise<string> {
  await server.listen({ host: "127.0.0.1", port: 0 });
  const address = server.server.address();
  if (!address || typeof address === "string") throw new Error("server has no TCP address");
  return `http://127.0.0.1:${address.port}`;
}


const JSON_HEADERS = { "content-type": "application/json" };

// (a) Fastify's default JSON body parsing and a 202: the HTTP floor.
async function startBare(): Promise<Target> {
  const server = Fastify({ logger: false });
  server.post("/a", async (_req, reply) => reply.code(202).send({ accepted: true }));
  try {
    const url = await listen(server);
    return {
      name: "(a) fastify, no work",
      url: url + "/a",
      headers: JSON_HEADERS,
      ...requestCounter(server.server, "/a"),
      close: () => server.close(),
    };
  } catch (err) {
    await server.close().catch(() => undefined);
    throw err;
  }
}

// (b) One autocommitted insert per request: the durable-write floor without
// batching (one WAL fsync per request under synchronous=FULL).
async function startSqliteInsert(): Promise<Target> {
  const dir = scratchDir("agentplane-bench-");
  const db = new Database(join(dir, "baseline.db"));
  const server = Fastify({ logger: false });
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec("create table events (id text primary key, body text not null)");
    const insert = db.prepare<[string, string]>("insert into events (id, body) values (?, ?)");
    const count = db.prepare<[], { n: number }>("select count(*) as n from events");
    server.post("/b", async (req, reply) => {
      const id = randomUUID();
      insert.run(id, JSON.stringify(req.body));
      return reply.code(202).send({ event_id: id });
    });
    const url = await listen(server);
    return {
      name: "(b) fastify + 1 sqlite insert",
      url: url + "/b",
      headers: JSON_HEADERS,
      ...requestCounter(server.server, "/b"),
      stored: () => count.get()!.n,
      async close() {
        await server.close();
        db.close();
        removeScratchDir(dir);
      },
    };
  } catch (err) {
    await server.close().catch(() => undefined);
    db.close();
    removeScratchDir(dir);
    throw err;
  }
}

// What the database check counts in an agentplane store (checkRuns).
interface RunCounts {
  events: number;
  // Events recording exactly one matched trigger, one of `matchingTriggerIds`.
  oneMatch: number;
  // Events whose payload or matched trigger ids are a JSON string of the JSON.
  doubleEncoded: number;
  runs: number;
  // Queued runs of a matching trigger, joined to their event, which recorded that trigger.
  linked: number;
  // Distinct events that have runs.
  perEvent: number;
  // Events that matched no trigger.
  unmatched: number;
}

type Engine = "sqlite" | "postgres";

interface AgentplaneTarget extends Target {
  // Each tenant's trigger that the event matches.
  matchingTriggerIds: string[];
  // Opened for the check after the load, so no reader is attached while the bench measures.
  countRuns: () => Promise<RunCounts>;
  // Filter evaluations that failed (agentplane_trigger_filter_failures_total).
  filterFailures: () => Promise<number>;
}

// agentplane as production runs it (every surface, SQLite store with
// synchronous=FULL or PostgreSQL with its defaults, silent logger), without a
// runtime: runs are queued, not executed. The webhook rate limit is set out of
// the way. `triggers`: the tenant's webhook triggers, when not the default ten
// made through the service (SQLite only).
async function startAgentplane(
  name: string,
  groupCommit: GroupCommitOptions | undefined,
  triggers?: number,
  signed?: { body: string },
  // Tenants mode: this many tenants, each request to the next one's source
  // (one included, so both sides pay the same generator).
  tenants?: number,
  engine: Engine = "sqlite",
): Promise<AgentplaneTarget> {
  if (engine === "postgres" && (triggers !== undefined || groupCommit)) throw new Error("on PostgreSQL only the tenants mode runs");
  const dir = scratchDir("agentplane-bench-");
  const dbPath = join(dir, "agentplane.db");
  let database: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  let store: Store | undefined;
  let app: App | undefined;
  try {
    if (engine === "postgres") database = await freshDatabase();
    store = database
      ? await createPostgresStore({ url: database.url })
      : createSqliteStore({ path: dbPath, synchronous: "FULL", ...(groupCommit && { groupCommit }) });
    const fixed: Principal = { subject: "bench-admin", scopes: new Set(), claims: {} };
    const authenticator: Authenticator = { authenticate: () => Promise.resolve(fixed) };
    app = await buildApp({
      store,
      secrets: new SecretBox(randomBytes(32)),
      authenticator,
      logger: createLogger("silent"),
      webhook: { maxBytes: 1024 * 1024, ratePerSecond: 1e9, burst: 1e9 },
      // No runtime drains the queue here, so the queued-runs quota is out of the way too.
      quotas: { ...DEFAULT_QUOTAS, queuedRuns: Number.MAX_SAFE_INTEGER, triggers: Number.MAX_SAFE_INTEGER },
    });
    const url = await listen(app.server);
    // As `serve` does: the expression sandbox's processes start ahead of the
    // first filter that needs one.
    app.start();
    const seeded = [];
    for (let i = 0; i < (tenants ?? 1); i++)
      seeded.push(
        await seed(
          app,
          triggers === undefined ? undefined : { dbPath, nonMatching: triggers - 1 },
          signed ? { url } : undefined,
          i === 0 ? TENANT : `${TENANT}-${i + 1}`,
        ),
      );
    const { token, signingSecret, sourceUrl } = seeded[0]!;
    const matchingTriggerIds = seeded.map((t) => t.matchingTriggerId);
    const opened = { app, store, database };
    const counts = database ? postgresCounts(database.url, matchingTriggerIds) : sqliteCounts(dbPath, matchingTriggerIds);
    // The load generator's process signs with the key from its environment.
    if (signed) process.env.BENCH_STANDARD_WEBHOOKS_KEY = signingSecret!.slice("whsec_".length);
    const path = signed ? new URL(sourceUrl!).pathname : WEBHOOK_PATH;
    return {
      name,
      url: url + path,
      ...(signed
        ? { headers: JSON_HEADERS, body: signed.body, rewrite: SIGN_STANDARD_WEBHOOKS }
        : tenants !== undefined
          ? { headers: JSON_HEADERS, rewrite: ROTATE_TOKENS, env: { BENCH_TOKENS: seeded.map((t) => t.token!).join(",") } }
          : { headers: { ...JSON_HEADERS, "x-webhook-token": token!, "idempotency-key": NEW_ID } }),
      ...requestCounter(app.server.server, path),
      stored: counts.stored,
      countRuns: counts.runs,
      matchingTriggerIds,
      async filterFailures() {
        const text = await (await fetch(`${url}/metrics`)).text();
        return [...text.matchAll(/^agentplane_trigger_filter_failures_total\{[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
      },
      async close() {
        await counts.close();
        await opened.app.stop(0);
        await opened.store.close();
        await opened.database?.drop();
        removeScratchDir(dir);
      },
    };
  } catch (err) {
    await app?.stop(0).catch(() => undefined);
    await store?.close().catch(() => undefined);
    await database?.drop().catch(() => undefined);
    removeScratchDir(dir);
    throw err;
  }
}

// The check's counts, read from the database file. A column holding a JSON
// string of the array (encoded twice) is decoded once more, and reported.
function sqliteCounts(dbPath: string, matchingTriggerIds: string[]) {
  let reader: Database.Database | undefined;
  const one = (query: string, ...params: string[]) => {
    reader ??= new Database(dbPath, { readonly: true });
    return (reader.prepare(query).get(...params) as { n: number }).n;
  };
  const ids = JSON.stringify(matchingTriggerIds);
  const triggerIds = "(case json_type(matched_trigger_ids) when 'text' then matched_trigger_ids ->> '$' else matched_trigger_ids end)";
  return {
    stored: () => one("select count(*) as n from events"),
    runs: async (): Promise<RunCounts> => ({
      events: one("select count(*) as n from events"),
      oneMatch: one(`select count(*) as n from events where json_array_length(${triggerIds}) = 1 and ${triggerIds} ->> '$[0]' in (select value from json_each(?))`, ids),
      doubleEncoded: one("select count(*) as n from events where json_type(payload) = 'text' or json_type(matched_trigger_ids) = 'text'"),
      runs: one("select count(*) as n from runs"),
      linked: one(
        "select count(*) as n from runs r join events e on e.id = r.event_id and e.tenant_id = r.tenant_id " +
          "where r.status = 'queued' and r.trigger_id in (select value from json_each(?)) and r.trigger_id = (e.matched_trigger_ids ->> '$[0]')",
        ids,
      ),
      perEvent: one("select count(distinct event_id) as n from runs"),
      unmatched: one(`select count(*) as n from events where json_array_length(${triggerIds}) = 0`),
    }),
    close: async () => reader?.close(),
  };
}

// The same counts on PostgreSQL (jsonb columns: a string where an array
// belongs is jsonb type 'string').
function postgresCounts(url: string, matchingTriggerIds: string[]) {
  let reader: postgres.Sql | undefined;
  const one = async (query: string, ...params: string[][]) => {
    reader ??= postgres(url, { max: 1, onnotice: () => {} });
    const [row] = await reader.unsafe<{ n: string }[]>(query, params);
    return Number(row!.n);
  };
  return {
    stored: () => one("select count(*) as n from events"),
    runs: async (): Promise<RunCounts> => ({
      events: await one("select count(*) as n from events"),
      oneMatch: await one(
        "select count(*) as n from events where jsonb_typeof(matched_trigger_ids) = 'array' " +
          "and jsonb_array_length(matched_trigger_ids) = 1 and matched_trigger_ids ->> 0 = any($1::text[])",
        matchingTriggerIds,
      ),
      doubleEncoded: await one("select count(*) as n from events where jsonb_typeof(payload) = 'string' or jsonb_typeof(matched_trigger_ids) = 'string'"),
      runs: await one("select count(*) as n from runs"),
      linked: await one(
        "select count(*) as n from runs r join events e on e.id = r.event_id and e.tenant_id = r.tenant_id " +
          "where r.status = 'queued' and r.trigger_id = any($1::text[]) and r.trigger_id = e.matched_trigger_ids ->> 0",
        matchingTriggerIds,
      ),
      perEvent: await one("select count(distinct event_id) as n from runs"),
      unmatched: await one(
        "select count(*) as n from events where jsonb_typeof(matched_trigger_ids) = 'array' and jsonb_array_length(matched_trigger_ids) = 0",
      ),
    }),
    close: async () => {
      await reader?.end();
    },
  };
}

// Tenant "bench", one agent, one webhook source (its real whk_ token), and
// ten webhook triggers on that source of which only "order.*" (with a filter
// the event passes) matches the posted event; all through the service with
// operator authority. With `direct`, the non-matching triggers are instead
// `direct.nonMatching` rows written in one transaction by a second connection
// (one commit each through the service would take minutes at 10,000).
// `signed`: the source is a Standard Webhooks one (its URL under `signed.url`).
// `tenant`: the slug of the tenant made for them.
async function seed(
  app: App,
  direct?: { dbPath: string; nonMatching: number },
  signed?: { url: string },
  tenant = TENANT,
): Promise<{ token?: string; signingSecret?: string; sourceUrl?: string; matchingTriggerId: string }> {
  const op = app.platform;
  await op.invokeAsOperator("createTenant", create(CreateTenantRequestSchema, { tenant: { slug: tenant, displayName: "Benchmark tenant" } }));
  const agent = create(AgentSchema, {
    name: "order-triage",
    description: "Triages new orders.",
    instructions: "Read the order event and flag anything unusual about it.",
    model: { baseUrl: "https://models.example.com/v1", model: "gpt-4o-mini", apiKey: "" },
    maxSteps: 8,
  });
  const { agent: created } = await op.invokeAsOperator("createAgent", create(CreateAgentRequestSchema, { agent }), tenant);
  const agentId = created?.id;
  if (!agentId) throw new Error("createAgent returned no id");
  const kind = signed ? WebhookSourceKind.STANDARD_WEBHOOKS : WebhookSourceKind.ENVELOPE;
  const source = await op.invokeAsOperator(
    "createWebhookSource",
    create(CreateWebhookSourceRequestSchema, { webhookSource: { name: "shop", kind } }),
    tenant,
  );
  const sourceId = source.webhookSource?.id;
  if (!sourceId || !(signed ? source.signingSecret?.startsWith("whsec_") : source.token?.startsWith("whk_")))
    throw new Error("createWebhookSource returned no source id, or no whk_ token or whsec_ secret");
  const trigger = (eventTypePattern: string, filter = "") =>
    op.invokeAsOperator(
      "createTrigger",
      create(CreateTriggerRequestSchema, { trigger: { agentId, kind: { case: "webhook", value: { sourceId, eventTypePattern, filter } } } }),
      tenant,
    );
  if (direct) insertNonMatching(direct.dbPath, agentId, sourceId, direct.nonMatching);
  else for (let i = 1; i <= NON_MATCHING_TRIGGERS; i++) await trigger(`other.type.${i}`);
  const matching = await trigger(MATCHING_PATTERN, MATCHING_FILTER);
  if (!matching.trigger?.id) throw new Error("createTrigger returned no id");
  // Not the source's `url`: that names the configured public URL, and the bench listens elsewhere.
  const sourceUrl = signed ? `${signed.url}/webhooks/sources/${sourceId}` : undefined;
  return { token: source.token, signingSecret: source.signingSecret, sourceUrl, matchingTriggerId: matching.trigger.id };
}

// Exact types, `*` patterns and `**` patterns in turn, none matching the
// bench's event type, with the matching trigger's filter.
function insertNonMatching(dbPath: string, agentId: string, sourceId: string, count: number): void {
  const db = new Database(dbPath);
  try {
    const insert = db.prepare(
      `insert into triggers (id, tenant_id, agent_id, enabled, kind, source_id, event_type_pattern, filter, create_time, update_time)
       select ?, tenant_id, id, 1, 'webhook', ?, ?, ?, ?, ? from agents where id = ?`,
    );
    const now = Date.now();
    db.transaction(() => {
      for (let i = 0; i < count; i++) {
        const pattern = i % 3 === 0 ? `other.type.${i}` : i % 3 === 1 ? `order.*.x${i}` : `x${i}.*.**`;
        insert.run(newId("trg"), sourceId, pattern, MATCHING_FILTER, now, now, agentId);
      }
    })();
  } finally {
    db.close();
  }
}

// One request through fetch before any load: the route answers 202 to the
// bench's body (agentplane: with one matched trigger), and agentplane really
// checks the token.
async function preflight(target: Target, defaultBody: string, agentplane: boolean): Promise<void> {
  Object.assign(process.env, target.env);
  const body = target.body ?? defaultBody;
  let headers = Object.fromEntries(Object.entries(target.headers).map(([k, v]) => [k, v.replace(NEW_ID, randomUUID())]));
  if (target.rewrite) headers = (createRequire(import.meta.url)(target.rewrite) as Signer)({ headers, body }).headers;
  const res = await fetch(target.url, { method: "POST", headers, body });
  const text = await res.text();
  if (res.status !== 202) throw new Error(`${target.name}: answered ${res.status}: ${text}`);
  if (!agentplane) return;
  const answer = JSON.parse(text) as { matched_triggers?: number };
  if (answer.matched_triggers !== 1)
    throw new Error(`${target.name}: the event matched ${answer.matched_triggers} triggers, expected 1: ${text}`);
  const forgery = headers["x-webhook-token"]
    ? { ...headers, "x-webhook-token": "whk_" + "A".repeat(43) }
    : { ...headers, "webhook-signature": `v1,${randomBytes(32).toString("base64")}` };
  const forged = await fetch(target.url, { method: "POST", headers: forgery, body });
  await forged.arrayBuffer();
  if (forged.status !== 401) throw new Error(`${target.name}: a forged credential got ${forged.status}, expected 401`);
}

// What the generator sends to a target: its URL and headers, the bench's
// body unless it has its own, its rewriting module and that module's
// environment.
function capacityTarget(target: Target, body: string, name = target.name): CapacityTarget {
  return {
    name,
    paced: { url: target.url, headers: target.headers, body: target.body ?? body, ...(target.rewrite && { rewrite: target.rewrite }) },
    ...(target.env && { env: target.env }),
  };
}

// The file system holding the temporary databases, from /proc/self/mounts
// (Linux; elsewhere "unknown"). On tmpfs an fsync costs nothing and the
// SQLite figures mean little.
function fileSystemOf(path: string): string {
  try {
    let best = { mount: "", type: "unknown" };
    for (const line of readFileSync("/proc/self/mounts", "utf8").split("\n")) {
      const [, mount, type] = line.split(" ");
      if (!mount || !type) continue;
      const prefix = mount.endsWith("/") ? mount : mount + "/";
      if ((path === mount || path.startsWith(prefix)) && mount.length >= best.mount.length) best = { mount, type };
    }
    return best.type;
  } catch {
    return "unknown";
  }
}

// What the generator sent and how many it saw answered 202, warm-up and
// searches together.
interface Counts {
  sent: number;
  answered: number;
}

// Accepted requests against what the database holds. The generator waits
// for every request to end, and a 202 follows its commit, so every 202 is a
// row; a request that ended without an answer may or may not have reached
// the server, or been stored. When every request was answered 202, rows
// stored, requests received and requests sent must all be equal.
async function checkStore(target: Target, before: number, { sent, answered }: Counts): Promise<string[]> {
  const stored = (await target.stored!()) - before;
  const received = target.received();
  const problems: string[] = [];
  const exact = sent === answered;
  if (exact ? stored !== answered || received !== sent : !(answered <= stored && stored <= received && received <= sent))
    problems.push(
      `${stored} rows stored and ${received} requests received for ${answered} answered 202 of ${sent} sent ` +
        (exact ? "(all must be equal)" : "(expected answered <= stored <= received <= sent)"),
    );
  return [`${target.name}: ${stored} stored of ${received} requests received, ${answered} of ${sent} sent answered 202`, ...problems];
}

// Every event evaluates the matching trigger's filter once; an evaluation
// that fails (over its budget, e.g. on a CPU-starved machine) does not match,
// so its event is stored without a run, as SPEC §9 has it. Those events must
// number exactly the failures the server counted; every other event has its
// one run.
function checkRuns(target: AgentplaneTarget, counts: RunCounts, filterFailures: number): { line: string; problems: string[]; note: string | undefined } {
  const { events, oneMatch, doubleEncoded, runs, linked, perEvent, unmatched } = counts;
  const triggersNamed =
    target.matchingTriggerIds.length === 1 ? `trigger ${target.matchingTriggerIds[0]}` : `its tenant's matching trigger (${target.matchingTriggerIds.length} tenants)`;
  const matched = events - filterFailures;
  const problems: string[] = [];
  if (unmatched !== filterFailures) problems.push(`${unmatched} events matched no trigger, but ${filterFailures} filter evaluations failed`);
  if (runs !== matched) problems.push(`${runs} runs for ${matched} events that matched`);
  if (linked !== runs) problems.push(`${runs - linked} runs not queued, not for the matching trigger or without their event`);
  if (perEvent !== matched) problems.push(`${matched - perEvent} matched events without a run (or a run shared by events)`);
  if (oneMatch !== matched) problems.push(`${matched - oneMatch} matched events without exactly the matching trigger recorded`);
  const notes = [
    filterFailures > 0 &&
      `${target.name}: ${filterFailures} of ${events} events matched no trigger because the filter's evaluation failed ` +
        `(agentplane_trigger_filter_failures_total; the machine was short of CPU)`,
    doubleEncoded > 0 &&
      `${target.name}: ${doubleEncoded} of ${events} events hold payload / matched_trigger_ids as a JSON string ` +
        `of the JSON (encoded twice), not as a JSON object / array`,
  ].filter((n): n is string => typeof n === "string");
  return {
    line: `${target.name}: ${runs} runs = ${matched} events that matched (of ${events}), each queued for ${triggersNamed} (one per event)`,
    problems,
    note: notes.length ? notes.join("\n  NOTE  ") : undefined,
  };
}

type Settings = ReturnType<typeof capacitySettingsFromEnv>;

// A warm-up per target, then a capacity search per target in the targets'
// order and back again (`compareCapacities`).
async function measure(targets: Target[], body: string, settings: Settings): Promise<Map<Target, CapacitySummary>> {
  const rows = await compareCapacities(
    targets.map((t) => capacityTarget(t, body)),
    settings,
    { rate: WARMUP_RATE, seconds: WARMUP_SECONDS },
  );
  console.log("");
  printCapacityTable(rows, "target", "events/s");
  return new Map(targets.map((t, i) => [t, rows[i]!]));
}

// Rows of warm-up and searches; the preflight's row, stored before counting
// began, is left out. Throws when a check failed.
async function checkDatabases(stores: Target[], agentplanes: AgentplaneTarget[], counts: Map<Target, Counts>): Promise<void> {
  console.log("\ndatabase check (warm-up and searches):");
  const failures: string[] = [];
  for (const t of stores) {
    const [line, ...problems] = await checkStore(t, PREFLIGHT_ROWS, counts.get(t)!);
    console.log(`  ${problems.length ? "FAILED" : "ok"}  ${line}`);
    failures.push(...problems.map((p) => `${t.name}: ${p}`));
  }
  for (const t of agentplanes) {
    const { line, problems, note } = checkRuns(t, await t.countRuns(), await t.filterFailures());
    console.log(`  ${problems.length ? "FAILED" : "ok"}  ${line}`);
    if (note) console.log(`  NOTE  ${note}`);
    failures.push(...problems.map((p) => `${t.name}: ${p}`));
  }
  if (failures.length) throw new Error(`database check failed:\n  ${failures.join("\n  ")}`);
}

function header(body: string, settings: Settings, what: string, order: string, engine: Engine = "sqlite"): string {
  const database =
    engine === "sqlite"
      ? `SQLite files in ${tmpdir()} (${fileSystemOf(tmpdir())}), journal_mode WAL, synchronous FULL`
      : `PostgreSQL at ${BENCH_POSTGRES_HOST}, a database per target, the server's own settings`;
  return (
    `agentplane webhook bench: POST ${WEBHOOK_PATH} (${Buffer.byteLength(body)} B event "${EVENT_TYPE}", ${what}, ` +
    `a new Idempotency-Key per request)\n` +
    `${describeHost()}\n${describeCapacity(settings)}\n` +
    `${database}\n` +
    `no runtime: agentplane queues one run per event and does not execute it\n` +
    `${WARMUP_SECONDS} s warm-up at ${WARMUP_RATE}/s per target, then searches in the order ${order}\n`
  );
}

async function compareBaselines(body: string, settings: Settings, targets: Target[]): Promise<void> {
  const bare = await startBare();
  targets.push(bare);
  const insert = await startSqliteInsert();
  targets.push(insert);
  const window0 = await startAgentplane("agentplane, window 0 ms (default)", undefined);
  targets.push(window0);
  const window2 = await startAgentplane("agentplane, window 2 ms", { windowMs: 2, maxBatch: 256 });
  targets.push(window2);
  const agentplanes = [window0, window2];
  for (const t of targets) await preflight(t, body, agentplanes.includes(t as AgentplaneTarget));
  for (const t of targets) t.startCounting();

  console.log(
    header(body, settings, `${NON_MATCHING_TRIGGERS + 1} webhook triggers, 1 matching, its filter ${MATCHING_FILTER}`, "a, b, w0, w2, w2, w0, b, a"),
  );
  const measured = await measure(targets, body, settings);

  const a = measured.get(bare)!;
  const b = measured.get(insert)!;
  console.log("");
  for (const t of agentplanes) {
    const s = measured.get(t)!;
    const vsBare = ratioOf(s, a);
    const vsInsert = ratioOf(s, b);
    console.log(
      `${s.name} / (a): ${(vsBare * 100).toFixed(1)} % of events/s ` +
        `(target >= ${TARGET_VS_BARE * 100} %: ${vsBare >= TARGET_VS_BARE ? "met" : "NOT met"})`,
    );
    console.log(
      `${s.name} / (b): ${vsInsert.toFixed(2)}x events/s ` +
        `(target > ${TARGET_VS_SQLITE.toFixed(1)}x: ${vsInsert > TARGET_VS_SQLITE ? "met" : "NOT met"})`,
    );
  }
  await checkDatabases([insert, ...agentplanes], agentplanes, measured);
}

async function compareTriggerCounts(body: string, settings: Settings, targets: Target[]): Promise<void> {
  const agentplanes: AgentplaneTarget[] = [];
  for (const n of TRIGGER_COUNTS) {
    const t = await startAgentplane(`agentplane, ${n.toLocaleString("en")} trigger${n === 1 ? "" : "s"}`, undefined, n);
    targets.push(t);
    agentplanes.push(t);
  }
  for (const t of agentplanes) await preflight(t, body, true);
  for (const t of agentplanes) t.startCounting();

  const counts = TRIGGER_COUNTS.map((n) => n.toLocaleString("en"));
  console.log(
    header(
      body,
      settings,
      `${counts.join(" / ")} webhook triggers in the tenant, 1 matching ("${MATCHING_PATTERN}", its filter ${MATCHING_FILTER}); ` +
        `the others exact types, * and ** patterns that do not match`,
      [...counts, ...[...counts].reverse()].join(", "),
    ),
  );
  const measured = await measure(agentplanes, body, settings);

  const one = measured.get(agentplanes[0]!)!;
  console.log("");
  for (const [i, t] of agentplanes.entries()) {
    if (i === 0) continue;
    const s = measured.get(t)!;
    const ratio = ratioOf(s, one);
    const last = i === agentplanes.length - 1;
    console.log(
      `${s.name} / 1 trigger: ${ratio.toFixed(2)}x events/s` +
        (last ? ` (target >= ${TARGET_VS_ONE_TRIGGER.toFixed(2)}x: ${ratio >= TARGET_VS_ONE_TRIGGER ? "met" : "NOT met"})` : ""),
    );
  }
  await checkDatabases(agentplanes, agentplanes, measured);
}

// The same service with one tenant sending, and with a hundred sending at
// once (each its own source, agent and ten triggers; requests spread over
// them in turn): what the many keep of the one's rate.
async function compareTenantCounts(body: string, settings: Settings, targets: Target[]): Promise<void> {
  const agentplanes: AgentplaneTarget[] = [];
  for (const n of TENANT_COUNTS) {
    const t = await startAgentplane(`agentplane, ${n} tenant${n === 1 ? "" : "s"}`, undefined, undefined, undefined, n, TENANTS_ENGINE);
    targets.push(t);
    agentplanes.push(t);
  }
  for (const t of agentplanes) await preflight(t, body, true);
  for (const t of agentplanes) t.startCounting();
  const counts = TENANT_COUNTS.map(String);
  console.log(
    header(
      body,
      settings,
      `${counts.join(" / ")} tenants sending, each with ${NON_MATCHING_TRIGGERS + 1} webhook triggers, 1 matching, its filter ${MATCHING_FILTER}`,
      [...counts, ...[...counts].reverse()].join(", "),
      TENANTS_ENGINE,
    ),
  );
  const measured = await measure(agentplanes, body, settings);
  const one = measured.get(agentplanes[0]!)!;
  const many = measured.get(agentplanes[agentplanes.length - 1]!)!;
  const ratio = ratioOf(many, one);
  console.log(
    `\n${many.name} / 1 tenant: ${ratio.toFixed(2)}x events/s (target >= ${TARGET_VS_ONE_TENANT.toFixed(2)}x: ${ratio >= TARGET_VS_ONE_TENANT ? "met" : "NOT met"})`,
  );
  await checkDatabases(agentplanes, agentplanes, measured);
}

// An OTLP/HTTP receiver in a child process (a collector runs elsewhere, not
// on the service's event loop): answers every export 200 and counts them.
async function startOtlpSink(): Promise<{ url: string; stats(): Promise<{ exports: number; bytes: number }>; close(): void }> {
  const program = `
    let exports = 0, bytes = 0;
    const server = require("node:http").createServer((req, res) => {
      if (req.url === "/stats") return res.end(JSON.stringify({ exports, bytes }));
      req.on("data", (c) => (bytes += c.length));
      req.on("end", () => { exports++; res.writeHead(200, { "content-type": "application/x-protobuf" }).end(); });
    });
    server.listen(0, "127.0.0.1", () => process.stdout.write(String(server.address().port) + "\\n"));`;
  const child = ownChild(spawn(process.execPath, ["-e", program], { stdio: ["ignore", "pipe", "inherit"] }));
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout.once("data", (d: Buffer) => resolve(d.toString().trim()));
    child.once("exit", (code) => reject(new Error(`the OTLP sink exited (${code})`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    stats: async () => (await (await fetch(`${url}/stats`)).json()) as { exports: number; bytes: number },
    close: () => void child.kill(),
  };
}

async function compareTracing(body: string, settings: Settings, targets: Target[]): Promise<void> {
  const rounds = positiveInt("BENCH_ROUNDS", 2);
  const sink = await startOtlpSink();
  try {
    await measureTracing(body, settings, targets, sink, rounds);
  } finally {
    sink.close();
  }
}

async function measureTracing(body: string, settings: Settings, targets: Target[], sink: Awaited<ReturnType<typeof startOtlpSink>>, rounds: number): Promise<void> {
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = sink.url;
  // Unset: every request sampled (parentbased_always_on, no traceparent sent).
  const sampler = process.env.OTEL_TRACES_SAMPLER ?? "parentbased_always_on";
  // The SDK's complaints (spans dropped from a full queue, failed exports), counted.
  const complaints: string[] = [];
  const sdkLog = pino({ level: "warn" }, { write: (line: string) => void complaints.push(line) });
  let tracing: Tracing | undefined;
  const turn = async (on: boolean) => {
    if (on && !tracing) tracing = await startTracing({ exporter: "otlp" }, sdkLog);
    if (!on && tracing) {
      await tracing.shutdown();
      tracing = undefined;
      // As a process that never started the SDK: the API's no-ops again.
      trace.disable();
      context.disable();
      propagation.disable();
      diag.disable();
    }
  };

  const t = await startAgentplane("agentplane, window 0 ms (default)", undefined);
  targets.push(t);
  await preflight(t, body, true);
  t.startCounting();
  // Two views of the one server, each turning tracing off or on before its
  // searches.
  const off = { ...capacityTarget(t, body, "tracing off (default)"), prepare: () => turn(false) };
  const on = { ...capacityTarget(t, body, `tracing on (${sampler})`), prepare: () => turn(true) };
  const order = Array.from({ length: rounds }, (_, i) => (i % 2 === 0 ? ["off", "on"] : ["on", "off"])).flat();
  console.log(
    header(
      body,
      settings,
      `${NON_MATCHING_TRIGGERS + 1} webhook triggers, 1 matching, its filter ${MATCHING_FILTER}; OTLP/HTTP protobuf to a sink in a child process`,
      order.join(", "),
    ),
  );
  const rows = await compareCapacities([off, on], settings, { rate: WARMUP_RATE, seconds: WARMUP_SECONDS }, rounds);
  await turn(false);
  const [offRow, onRow] = rows as [CapacitySummary, CapacitySummary];
  console.log("");
  printCapacityTable(rows, "agentplane", "events/s");
  const spread = (s: CapacitySummary) => `${Math.min(...s.runs).toFixed(0)}–${Math.max(...s.runs).toFixed(0)}`;
  const { exports, bytes } = await sink.stats();
  console.log(
    `\non / off: ${(ratioOf(onRow, offRow) * 100).toFixed(1)} % of events/s sustained (off ${spread(offRow)}, on ${spread(onRow)}); ` +
      `p50 ${offRow.p50.toFixed(1)} -> ${onRow.p50.toFixed(1)} ms, p99 ${offRow.p99.toFixed(1)} -> ${onRow.p99.toFixed(1)} ms`,
  );
  console.log(`exported: ${exports} OTLP requests, ${(bytes / 1e6).toFixed(1)} MB; SDK warnings: ${complaints.length}${complaints.length ? ` (first: ${JSON.parse(complaints[0]!).msg})` : ""}`);
  const counts = { sent: offRow.sent + onRow.sent, answered: offRow.answered + onRow.answered };
  await checkDatabases([t], [t], new Map([[t, counts]]));
}

// The same event as a Standard Webhooks sender sends it: `type`, `data`.
function standardWebhooksBody(envelope: string): string {
  const { event_type, payload } = JSON.parse(envelope) as { event_type: string; payload: unknown };
  return JSON.stringify({ type: event_type, timestamp: "2025-03-14T09:26:53.589Z", data: payload });
}

async function compareSigned(body: string, settings: Settings, targets: Target[]): Promise<void> {
  const envelope = await startAgentplane("agentplane, envelope (X-Webhook-Token)", undefined);
  targets.push(envelope);
  const signed = await startAgentplane("agentplane, Standard Webhooks (signed)", undefined, undefined, { body: standardWebhooksBody(body) });
  targets.push(signed);
  const agentplanes = [envelope, signed];
  for (const t of agentplanes) await preflight(t, body, true);
  for (const t of agentplanes) t.startCounting();
  console.log(
    header(
      body,
      settings,
      `${NON_MATCHING_TRIGGERS + 1} webhook triggers, 1 matching, its filter ${MATCHING_FILTER}; the signed target at ` +
        `/webhooks/sources/{id}, each request signed (HMAC-SHA256) by the load generator with a new webhook-id`,
      "envelope, signed, signed, envelope",
    ),
  );
  const measured = await measure(agentplanes, body, settings);
  const e = measured.get(envelope)!;
  const s = measured.get(signed)!;
  console.log(
    `
signed / envelope: ${(ratioOf(s, e) * 100).toFixed(1)} % of events/s; ` +
      `p50 ${e.p50.toFixed(1)} -> ${s.p50.toFixed(1)} ms, p99 ${e.p99.toFixed(1)} -> ${s.p99.toFixed(1)} ms`,
  );
  await checkDatabases(agentplanes, agentplanes, measured);
}

const MODES = { baselines: compareBaselines, triggers: compareTriggerCounts, tenants: compareTenantCounts, tracing: compareTracing, signed: compareSigned };

// `run.js` compares agentplane with the two baselines; `run.js triggers`
// compares tenants of 1 to 10,000 webhook triggers; `run.js tracing`
// compares tracing off and on; `run.js signed` compares a Standard Webhooks
// source with an envelope source.
async function main(): Promise<void> {
  const mode = process.argv[2] ?? "baselines";
  if (!(mode in MODES)) throw new Error(`unknown mode "${mode}": ${Object.keys(MODES).join(", ")} (baselines by default)`);
  const settings = capacitySettingsFromEnv();
  const targets: Target[] = [];
  try {
    await MODES[mode as keyof typeof MODES](eventBody(), settings, targets);
  } finally {
    for (const t of targets.reverse()) await t.close();
  }
}

runBench(main);
