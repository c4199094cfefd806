// Every bound on what a tenant may send or keep, in one place: string
// lengths (characters), counts of repeated fields, JSON nesting, and the
// per-tenant quotas. docs/reference/limits.md lists the same numbers.
export const MAX_LENGTH = {
  id: 64,
  slug: 63,
  name: 200,
  displayName: 200,
  description: 2000,
  instructions: 100_000,
  subject: 255,
  url: 2048,
  clientId: 255,
  secret: 8192,
  scope: 200,
  audience: 2048,
  modelName: 200,
  toolName: 200,
  eventType: 200,
  eventTypePattern: 200,
  // JSONata: a trigger filter is a predicate; step arguments build a tool's input.
  filter: 4096,
  stepArguments: 16_384,
  // A webhook source's mapping builds an event from a delivery.
  mapping: 16_384,
  // A GitHub webhook's secret (any text the sender was given).
  githubSecret: 256,
  cron: 200,
  timezone: 64,
  idempotencyKey: 255,
} as const;

export const MAX_COUNT = {
  skillIds: 64,
  allowedToolSkills: 64,
  allowedTools: 256,
  steps: 64,
  scopes: 32,
} as const;

// JSON values a tenant sends (webhook payloads, run inputs) nest at most this
// deep unless configured otherwise: deeper values overflow recursive code.
export const DEFAULT_JSON_MAX_DEPTH = 64;
// Shortest interval between two slots of a schedule trigger, in seconds: a
// minute, as cron itself, Kubernetes CronJobs and cloud schedulers have.
// Every slot is a run; a per-second schedule is 86,400 runs a day per
// trigger, and at the queued-runs quota a skipped slot a second.
export const DEFAULT_SCHEDULE_MIN_INTERVAL_SECONDS = 60;

export interface Quotas {
  agents: number;
  skills: number;
  triggers: number;
  webhookSources: number;
  members: number;
  // Runs waiting to be claimed (status queued).
  queuedRuns: number;
}

export const DEFAULT_QUOTAS: Quotas = {
  agents: 1000,
  skills: 200,
  triggers: 1000,
  webhookSources: 100,
  members: 1000,
  queuedRuns: 10_000,
};

// The variable that sets each quota, named in the error so an operator knows
// what to raise.
export const QUOTA_VARIABLES: Record<keyof Quotas, string> = {
  agents: "AGENTPLANE_QUOTA_AGENTS",
  skills: "AGENTPLANE_QUOTA_SKILLS",
  triggers: "AGENTPLANE_QUOTA_TRIGGERS",
  webhookSources: "AGENTPLANE_QUOTA_WEBHOOK_SOURCES",
  members: "AGENTPLANE_QUOTA_MEMBERS",
  queuedRuns: "AGENTPLANE_QUOTA_QUEUED_RUNS",
};

// A plan step's arguments get this long to evaluate unless configured
// (AGENTPLANE_STEP_EXPRESSION_BUDGET_MS): run time and TestExpression alike.
export const DEFAULT_STEP_BUDGET_MS = 1000;
