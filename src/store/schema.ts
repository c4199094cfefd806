// Drizzle schema: the single definition of the tables; migrations under
// ./migrations are generated from it by drizzle-kit (`make migrations`).
import { sql } from "drizzle-orm";
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

// Timestamps are integer milliseconds since the epoch.
const times = {
  createTime: integer("create_time").notNull(),
  updateTime: integer("update_time").notNull(),
};

export const tenants = sqliteTable("tenants", {
  id: text("id").primaryKey(),
  slug: text("slug").notNull().unique(),
  displayName: text("display_name").notNull().default(""),
  ...times,
});

const tenantId = () =>
  text("tenant_id")
    .notNull()
    .references(() => tenants.id, { onDelete: "cascade" });

export const members = sqliteTable(
  "members",
  {
    id: text("id").primaryKey(),
    tenantId: tenantId(),
    subject: text("subject").notNull(),
    role: text("role", { enum: ["admin", "viewer"] }).notNull(),
    ...times,
  },
  (t) => [uniqueIndex("members_tenant_subject").on(t.tenantId, t.subject)],
);

export interface AgentSpec {
  skillIds: string[];
  allowedTools: Record<string, string[]>;
  steps: { skillId: string; tool: string; arguments: string }[];
  model?: { baseUrl: string; model: string };
}

export const agents = sqliteTable(
  "agents",
  {
    id: text("id").primaryKey(),
    tenantId: tenantId(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    instructions: text("instructions").notNull().default(""),
    spec: text("spec", { mode: "json" }).$type<AgentSpec>().notNull(),
    // AES-256-GCM sealed; see lib/secret-box.ts.
    modelApiKey: text("model_api_key"),
    maxSteps: integer("max_steps").notNull(),
    timeoutMs: integer("timeout_ms").notNull(),
    enabled: integer("enabled", { mode: "boolean" }).notNull(),
    ...times,
  },
  (t) => [index("agents_tenant").on(t.tenantId, t.id)],
);

export type SkillAuthSpec =
  | { mode: "none" }
  | { mode: "static_bearer" }
  | { mode: "oauth"; issuer: string; clientId: string; scopes: string[]; audience: string };

export interface SkillTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export const skills = sqliteTable(
  "skills",
  {
    id: text("id").primaryKey(),
    tenantId: tenantId(),
    name: text("name").notNull(),
    mcpUrl: text("mcp_url").notNull(),
    auth: text("auth", { mode: "json" }).$type<SkillAuthSpec>().notNull(),
    // Sealed static bearer token or OAuth client secret.
    authSecret: text("auth_secret"),
    tools: text("tools", { mode: "json" }).$type<SkillTool[]>().notNull(),
    toolsRefreshTime: integer("tools_refresh_time"),
    toolsRefreshError: text("tools_refresh_error").notNull().default(""),
    ...times,
  },
  (t) => [index("skills_tenant").on(t.tenantId, t.id)],
);

export const webhookSources = sqliteTable(
  "webhook_sources",
  {
    id: text("id").primaryKey(),
    tenantId: tenantId(),
    name: text("name").notNull(),
    enabled: integer("enabled", { mode: "boolean" }).notNull(),
    // SHA-256 hex digests; the plain token is never stored.
    tokenDigest: text("token_digest").notNull().unique(),
    previousTokenDigest: text("previous_token_digest").unique(),
    previousTokenExpireTime: integer("previous_token_expire_time"),
    ...times,
  },
  (t) => [index("webhook_sources_tenant").on(t.tenantId, t.id)],
);

export const triggers = sqliteTable(
  "triggers",
  {
    id: text("id").primaryKey(),
    tenantId: tenantId(),
    agentId: text("agent_id")
      .notNull()
      .references(() => agents.id),
    enabled: integer("enabled", { mode: "boolean" }).notNull(),
    kind: text("kind", { enum: ["webhook", "schedule", "manual"] }).notNull(),
    sourceId: text("source_id").references(() => webhookSources.id),
    eventTypePattern: text("event_type_pattern"),
    filter: text("filter"),
    cron: text("cron"),
    timezone: text("timezone"),
    // The webhook filter's last failure (budget, depth, error), for operators.
    filterError: text("filter_error"),
    filterErrorTime: integer("filter_error_time"),
    ...times,
  },
  (t) => [
    index("triggers_tenant").on(t.tenantId, t.id),
    index("triggers_agent").on(t.tenantId, t.agentId),
    index("triggers_match").on(t.tenantId, t.kind, t.sourceId),
  ],
);

export const events = sqliteTable(
  "events",
  {
    id: text("id").primaryKey(),
    tenantId: tenantId(),
    sourceId: text("source_id").notNull(),
    eventType: text("event_type").notNull(),
    payload: text("payload", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    receiveTime: integer("receive_time").notNull(),
    idempotencyKey: text("idempotency_key"),
    matchedTriggerIds: text("matched_trigger_ids", { mode: "json" }).$type<string[]>().notNull(),
    ...times,
  },
  (t) => [
    index("events_tenant").on(t.tenantId, t.id),
    // A unique index, not a check-then-insert: two concurrent posts of one
    // key store one event.
    uniqueIndex("events_source_idempotency").on(t.sourceId, t.idempotencyKey).where(sql`idempotency_key is not null`),
  ],
);

export type RunStatus = "queued" | "running" | "succeeded" | "failed" | "cancelled" | "timed_out";

export interface RunStepRecord {
  kind: "tool_call" | "model_call";
  skillId: string;
  tool: string;
  arguments: unknown;
  result?: unknown;
  error: string;
  startTime: number;
  endTime?: number;
}

export const runs = sqliteTable(
  "runs",
  {
    id: text("id").primaryKey(),
    tenantId: tenantId(),
    agentId: text("agent_id").notNull(),
    triggerId: text("trigger_id"),
    eventId: text("event_id"),
    input: text("input", { mode: "json" }).$type<unknown>(),
    status: text("status").$type<RunStatus>().notNull(),
    attempt: integer("attempt").notNull().default(0),
    steps: text("steps", { mode: "json" }).$type<RunStepRecord[]>().notNull(),
    output: text("output", { mode: "json" }).$type<unknown>(),
    error: text("error").notNull().default(""),
    startTime: integer("start_time"),
    endTime: integer("end_time"),
    leaseOwner: text("lease_owner"),
    leaseExpireTime: integer("lease_expire_time"),
    ...times,
  },
  (t) => [
    index("runs_tenant").on(t.tenantId, t.id),
    index("runs_event").on(t.eventId),
    // The queue: queued runs oldest first, and running runs by lease expiry.
    index("runs_queue").on(t.status, t.id),
    // A tenant's queued runs, counted against its quota.
    index("runs_tenant_status").on(t.tenantId, t.status),
    index("runs_leases").on(t.status, t.leaseExpireTime),
  ],
);

// One row per fired schedule slot: the primary key makes a slot fire once,
// across restarts and replicas.
export const scheduleSlots = sqliteTable(
  "schedule_slots",
  {
    triggerId: text("trigger_id")
      .notNull()
      .references(() => triggers.id, { onDelete: "cascade" }),
    slotTime: integer("slot_time").notNull(),
    runId: text("run_id").notNull(),
  },
  (t) => [primaryKey({ columns: [t.triggerId, t.slotTime] })],
);

export type TenantRow = typeof tenants.$inferSelect;
export type MemberRow = typeof members.$inferSelect;
export type AgentRow = typeof agents.$inferSelect;
export type SkillRow = typeof skills.$inferSelect;
export type WebhookSourceRow = typeof webhookSources.$inferSelect;
export type TriggerRow = typeof triggers.$inferSelect;
export type EventRow = typeof events.$inferSelect;
export type RunRow = typeof runs.$inferSelect;
