// The PostgreSQL schema: the same tables, columns and indexes as
// ../sqlite/schema.ts, in PostgreSQL types (bigint milliseconds, jsonb,
// boolean). The row shapes it infers must equal ../rows.ts (checked below at
// compile time). Migrations under ./migrations come from it (`make migrations`).
import { sql } from "drizzle-orm";
import { bigint, boolean, customType, doublePrecision, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";
import { RUN_CHANGED, RUN_ENDED } from "../run-conditions.js";
import type * as rows from "../rows.js";
import type { AgentSpec, RunStatus, RunStepRecord, StoredSkillAuth, SkillTool } from "../types.js";

// Timestamps are integer milliseconds since the epoch.
// Ids sort bytewise, as in SQLite: keyset pages and the run queue order by
// id, and a locale collation would order (and index) them differently.
const idText = customType<{ data: string }>({ dataType: () => 'text COLLATE "C"' });
const ms = (name: string) => bigint(name, { mode: "number" });
const times = {
  createTime: ms("create_time").notNull(),
  updateTime: ms("update_time").notNull(),
};

export const tenants = pgTable("tenants", {
  id: idText("id").primaryKey(),
  slug: text("slug").notNull().unique(),
  displayName: text("display_name").notNull().default(""),
  ...times,
});

const tenantId = () =>
  text("tenant_id")
    .notNull()
    .references(() => tenants.id, { onDelete: "cascade" });

// The tenant of an event or a run, without a foreign key: both are written
// only for a tenant the service resolved from a row that references it (the
// webhook source, the agent), tenants are never deleted, and the check cost
// a lookup of the tenant (and on PostgreSQL a KEY SHARE lock on its row,
// taken by every concurrent ingest of the tenant) per inserted row: two per
// event on the hot path.
const ownerTenantId = () => text("tenant_id").notNull();

export const members = pgTable(
  "members",
  {
    id: idText("id").primaryKey(),
    tenantId: tenantId(),
    subject: text("subject").notNull(),
    role: text("role", { enum: ["admin", "viewer"] }).notNull(),
    ...times,
  },
  (t) => [
    uniqueIndex("members_tenant_subject").on(t.tenantId, t.subject),
    // A caller's own tenants (ListMemberships), without a scan of every member.
    index("members_subject").on(t.subject, t.tenantId),
  ],
);

export const agents = pgTable(
  "agents",
  {
    id: idText("id").primaryKey(),
    tenantId: tenantId(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    instructions: text("instructions").notNull().default(""),
    spec: jsonb("spec").$type<AgentSpec>().notNull(),
    // AES-256-GCM sealed; see lib/secret-box.ts.
    modelApiKey: text("model_api_key"),
    maxSteps: integer("max_steps").notNull(),
    timeoutMs: integer("timeout_ms").notNull(),
    // Runs of the agent executing at once, across replicas; null: no cap.
    maxConcurrentRuns: integer("max_concurrent_runs"),
    enabled: boolean("enabled").notNull(),
    ...times,
  },
  (t) => [index("agents_tenant").on(t.tenantId, t.id), uniqueIndex("agents_tenant_name").on(t.tenantId, t.name)],
);

export const skills = pgTable(
  "skills",
  {
    id: idText("id").primaryKey(),
    tenantId: tenantId(),
    name: text("name").notNull(),
    mcpUrl: text("mcp_url").notNull(),
    auth: jsonb("auth").$type<StoredSkillAuth>().notNull(),
    // Sealed static bearer token, OAuth client secret, or the JSON object of
    // header values (`headers` mode).
    authSecret: text("auth_secret"),
    // Sealed PKCS#8 PEM of the private_key_jwt key pair; its public JWK is in
    // `auth`.
    authPrivateKey: text("auth_private_key"),
    tools: jsonb("tools").$type<SkillTool[]>().notNull(),
    toolsRefreshTime: ms("tools_refresh_time"),
    toolsRefreshError: text("tools_refresh_error").notNull().default(""),
    ...times,
  },
  (t) => [index("skills_tenant").on(t.tenantId, t.id), uniqueIndex("skills_tenant_name").on(t.tenantId, t.name)],
);

export const webhookSources = pgTable(
  "webhook_sources",
  {
    id: idText("id").primaryKey(),
    tenantId: tenantId(),
    name: text("name").notNull(),
    enabled: boolean("enabled").notNull(),
    // SHA-256 hex digests; the plain token is never stored.
    kind: text("kind", { enum: ["envelope", "standard_webhooks", "github", "stripe"] })
      .notNull()
      .default("envelope"),
    // SHA-256 hex digests of an envelope source's token; the plain token is
    // never stored. Signed kinds have none.
    tokenDigest: text("token_digest").unique(),
    previousTokenDigest: text("previous_token_digest").unique(),
    previousTokenExpireTime: ms("previous_token_expire_time"),
    // Signed kinds: the sealed signing secret, and the one a rotation
    // replaced while it still verifies.
    signingSecret: text("signing_secret"),
    previousSigningSecret: text("previous_signing_secret"),
    previousSigningSecretExpireTime: ms("previous_signing_secret_expire_time"),
    // JSONata turning a delivery into {event_type, payload}; null: none.
    mapping: text("mapping"),
    ...times,
  },
  (t) => [index("webhook_sources_tenant").on(t.tenantId, t.id), uniqueIndex("webhook_sources_tenant_name").on(t.tenantId, t.name)],
);

export const triggers = pgTable(
  "triggers",
  {
    id: idText("id").primaryKey(),
    tenantId: tenantId(),
    agentId: text("agent_id")
      .notNull()
      .references(() => agents.id),
    enabled: boolean("enabled").notNull(),
    kind: text("kind", { enum: ["webhook", "schedule", "manual"] }).notNull(),
    sourceId: text("source_id").references(() => webhookSources.id),
    eventTypePattern: text("event_type_pattern"),
    filter: text("filter"),
    cron: text("cron"),
    timezone: text("timezone"),
    // The webhook filter's last failure (budget, depth, error), for operators.
    filterError: text("filter_error"),
    filterErrorTime: ms("filter_error_time"),
    ...times,
  },
  (t) => [
    index("triggers_tenant").on(t.tenantId, t.id),
    index("triggers_agent").on(t.tenantId, t.agentId),
    index("triggers_match").on(t.tenantId, t.kind, t.sourceId),
    // The scheduler's read of every tenant's schedule triggers: without it,
    // a scan of every webhook trigger of every tenant at each tick.
    index("triggers_schedule").on(t.id).where(sql`kind = 'schedule'`),
  ],
);

export const events = pgTable(
  "events",
  {
    id: idText("id").primaryKey(),
    tenantId: ownerTenantId(),
    sourceId: text("source_id").notNull(),
    eventType: text("event_type").notNull(),
    payload: jsonb("payload").$type<Record<string, unknown>>().notNull(),
    receiveTime: ms("receive_time").notNull(),
    idempotencyKey: text("idempotency_key"),
    matchedTriggerIds: jsonb("matched_trigger_ids").$type<string[]>().notNull(),
    ...times,
  },
  (t) => [
    index("events_tenant").on(t.tenantId, t.id),
    // Retention deletes the oldest events first.
    index("events_receive_time").on(t.receiveTime),
    // A unique index, not a check-then-insert: two concurrent posts of one
    // key store one event.
    uniqueIndex("events_source_idempotency").on(t.sourceId, t.idempotencyKey).where(sql`idempotency_key is not null`),
  ],
);

export const runs = pgTable(
  "runs",
  {
    id: idText("id").primaryKey(),
    tenantId: ownerTenantId(),
    agentId: text("agent_id").notNull(),
    triggerId: text("trigger_id"),
    eventId: text("event_id"),
    input: jsonb("input").$type<unknown>(),
    status: text("status").$type<RunStatus>().notNull(),
    attempt: integer("attempt").notNull().default(0),
    steps: jsonb("steps").$type<RunStepRecord[]>().notNull(),
    output: jsonb("output").$type<unknown>(),
    error: text("error").notNull().default(""),
    startTime: ms("start_time"),
    endTime: ms("end_time"),
    leaseOwner: text("lease_owner"),
    leaseExpireTime: ms("lease_expire_time"),
    // The W3C traceparent of what queued the run (tracing on), so that its
    // execution, on any replica or thread, continues that trace.
    traceParent: text("trace_parent"),
    ...times,
  },
  (t) => [
    // The runs of events (the events list's page), by event and tenant: with
    // both conditions on it a plan made without statistics prefers it to a
    // walk of the tenant's prefix of runs_agent, which it took when this held
    // the event alone. Led by the event, whose ids grow with time: a commit
    // writes the index's last page, not a page per tenant.
    index("runs_event").on(t.eventId, t.tenantId),
    // The runs list filtered by agent or by status (the console's filters),
    // newest first: a seek, not a walk over every run of the tenant.
    index("runs_agent").on(t.tenantId, t.agentId, t.id),
    // By status, of the runs that ended; queued runs are on runs_queued,
    // running runs on runs_running, so each run is in one (tenant, status,
    // id) range of the three, and a read of all of a tenant's runs by id reads
    // each range (RUN_GROUPS in ../run-conditions.ts): no index holds every
    // run of a tenant by id. A run is queued when it is written, so ingest
    // adds no entry here: each index that leads with the tenant costs a
    // commit a page per tenant in it, which SQLite writes whole
    // (bench/README, `tenants`). Not partial on "left the queue": a
    // statement naming status = 'running' proves that predicate, and a
    // generic plan made on a nearly empty table took this index for the
    // claim's running runs and walked every ended run (queue-cost.test.ts).
    // The runs list names the condition (list-query.ts).
    index("runs_status").on(t.tenantId, t.status, t.id).where(sql.raw(RUN_ENDED)),
    // The queue: each tenant's queued runs oldest first (the fair claim seeks
    // from tenant to tenant), and a tenant's queued runs counted against its
    // quota. Partial: it holds the backlog only, so a claim never steps over
    // runs that ended, and no planner prefers another index that would.
    index("runs_queued").on(t.tenantId, t.id).where(sql`status = 'queued'`),
    // Running runs: expired leases, the next expiry, the claim's counts of
    // running runs per tenant and agent. Partial, as runs_queued: it holds
    // the running runs only (bounded by the workers), so no plan of a
    // query on queued runs can walk it and sort the backlog.
    index("runs_leases").on(t.leaseExpireTime).where(sql`status = 'running'`),
    // A tenant's running runs newest first: the runs list's status filter,
    // the overview's oldest open run, and the change feed's running runs not
    // changed since they were queued (RUN_LIST_SPLIT). Bounded by the
    // workers, as runs_leases: any plan that walks it walks few.
    index("runs_running").on(t.tenantId, t.id).where(sql`status = 'running'`),
    // Retention deletes ended runs by end time. Partial, on the ended
    // statuses retention's query names in the same words: a run's insert and
    // claim add no entry (a claim changes indexed columns, so on PostgreSQL
    // it is not a HOT update and every index the new row version is in gets
    // one), and on a table never analyzed the planner walks this index in
    // end-time order, a batch's rows, where it walked all of runs_status.
    index("runs_end_time").on(t.endTime).where(sql.raw(RUN_ENDED)),
    // Change feeds (WatchRuns): a tenant's runs by their last change, of the
    // runs that ended or changed since they were queued; the others are read
    // on runs_queued and runs_running (RUN_LIST_SPLIT in list-query.ts,
    // which names this condition). So ingest adds no entry here, and a claim
    // adds one rather than moving one. The ended statuses are named, not
    // "status <> 'queued'", for the reason runs_status gives.
    index("runs_changes")
      .on(t.tenantId, t.updateTime, t.id)
      .where(sql.raw(RUN_CHANGED)),
  ],
);

// One row per fired schedule slot: the primary key makes a slot fire once,
// across restarts and replicas.
export const scheduleSlots = pgTable(
  "schedule_slots",
  {
    triggerId: text("trigger_id")
      .notNull()
      .references(() => triggers.id, { onDelete: "cascade" }),
    slotTime: ms("slot_time").notNull(),
    runId: text("run_id").notNull(),
  },
  (t) => [primaryKey({ columns: [t.triggerId, t.slotTime] })],
);

// The overview's sealed rollups (store/overview.ts, ./overview-rollups.ts):
// per tenant and slot (its start, ms), a count per group of the runs created
// in it (kind: bucket by status, agent, trigger, failure word, duration key)
// and of its events. Written once, when the slot is sealed; deleted by
// retention (slot) with the runs they counted.
export const overviewRollups = pgTable(
  "overview_rollups",
  {
    tenantId: ownerTenantId(),
    slot: ms("slot").notNull(),
    kind: text("kind").notNull(),
    status: text("status").notNull(),
    key: text("key").notNull(),
    n: integer("n").notNull(),
    failures: integer("failures").notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.slot, t.kind, t.status, t.key] }), index("overview_rollups_slot").on(t.slot)],
);

// Each tenant's sealed slots: [sealed_from, sealed_until) are in
// overview_rollups. The sealer moves sealed_until (the row locked), retention
// sealed_from.
export const overviewWatermarks = pgTable("overview_watermarks", {
  tenantId: text("tenant_id").primaryKey(),
  sealedFrom: ms("sealed_from").notNull(),
  sealedUntil: ms("sealed_until").notNull(),
});

// Each tenant's queued runs as two running totals, so that a quota is
// checked in one row read however deep the backlog: `in` counts the runs that
// became queued (inserted, or released back), `out` those that stopped being
// queued (claimed, cancelled, deleted); queued = in − out. Kept by triggers
// on runs (migration 0012), so no writer can miss them. Two rows, not one:
// an ingest holds `in` through its commit's disk wait, and a claim that
// updated the same row would wait for it.
export const queuedRunCounts = pgTable(
  "queued_run_counts",
  {
    tenantId: text("tenant_id").notNull(),
    side: text("side").$type<"in" | "out">().notNull(),
    n: bigint("n", { mode: "number" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.side] })],
);

// Token buckets of the per-source webhook rate limit, shared by every process
// on the database.
export const rateLimitBuckets = pgTable("rate_limit_buckets", {
  key: text("key").primaryKey(),
  tokens: doublePrecision("tokens").notNull(),
  refillTime: ms("refill_time").notNull(),
});

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
// Fails to compile when a column differs in type or nullability from SQLite's.
export type RowsAgree = [
  Assert<Same<typeof tenants.$inferSelect, rows.TenantRow>>,
  Assert<Same<typeof members.$inferSelect, rows.MemberRow>>,
  Assert<Same<typeof agents.$inferSelect, rows.AgentRow>>,
  Assert<Same<typeof skills.$inferSelect, rows.SkillRow>>,
  Assert<Same<typeof webhookSources.$inferSelect, rows.WebhookSourceRow>>,
  Assert<Same<typeof triggers.$inferSelect, rows.TriggerRow>>,
  Assert<Same<typeof events.$inferSelect, rows.EventRow>>,
  Assert<Same<typeof runs.$inferSelect, rows.RunRow>>,
  Assert<Same<typeof tenants.$inferInsert, rows.TenantInsert>>,
  Assert<Same<typeof members.$inferInsert, rows.MemberInsert>>,
  Assert<Same<typeof agents.$inferInsert, rows.AgentInsert>>,
  Assert<Same<typeof skills.$inferInsert, rows.SkillInsert>>,
  Assert<Same<typeof webhookSources.$inferInsert, rows.WebhookSourceInsert>>,
  Assert<Same<typeof triggers.$inferInsert, rows.TriggerInsert>>,
  Assert<Same<typeof events.$inferInsert, rows.EventInsert>>,
  Assert<Same<typeof runs.$inferInsert, rows.RunInsert>>,
];
