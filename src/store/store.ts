// The store contract the service layer depends on. Every call is async so
// that a PostgreSQL implementation of the same schema can stand in for SQLite.
import type {
  AgentInsert,
  AgentRow,
  EventInsert,
  EventRow,
  MemberInsert,
  MemberRow,
  RunInsert,
  RunRow,
  SkillInsert,
  SkillRow,
  TenantInsert,
  TenantRow,
  TriggerInsert,
  TriggerRow,
  WebhookSourceInsert,
  WebhookSourceRow,
} from "./rows.js";
import type { OverviewStore } from "./overview.js";

export interface ListQuery<Row> {
  limit: number;
  // Keyset cursor: only rows whose id sorts before this one (newest first).
  beforeId?: string;
  // The other way, oldest first (change feeds): only rows whose (`by`, id)
  // sorts after (`value`, `id`), or whose id sorts after `id` when `by` is
  // omitted. Not with `beforeId`.
  after?: { by?: keyof Row & string; value?: number; id: string };
  // Equality filters; undefined values are ignored.
  where?: Partial<Row>;
}

export interface TenantRepo<Row, Insert> {
  list(tenantId: string, query: ListQuery<Row>): Promise<Row[]>;
  get(tenantId: string, id: string): Promise<Row | undefined>;
  insert(row: Insert): Promise<Row>;
  // Inserts unless the tenant already has `limit` rows of this kind (the count
  // and the insert in one transaction); undefined when it has.
  insertWithin(row: Insert, limit: number): Promise<Row | undefined>;
  update(tenantId: string, id: string, patch: Partial<Insert>): Promise<Row | undefined>;
  delete(tenantId: string, id: string): Promise<boolean>;
}

export interface TenantStore {
  insert(row: TenantInsert): Promise<TenantRow>;
  // By id (`ten_…`) or slug.
  get(idOrSlug: string): Promise<TenantRow | undefined>;
  list(query: ListQuery<TenantRow>): Promise<TenantRow[]>;
  update(id: string, patch: Partial<TenantInsert>): Promise<TenantRow | undefined>;
}

export type MemberChange = { remove: true } | { remove?: false; role: MemberRow["role"]; updateTime: number };

export type MemberChangeResult = { outcome: "done"; row: MemberRow } | { outcome: "not_found" } | { outcome: "last_admin" };

// One tenant as a caller sees it in its tenant switcher.
export interface MembershipRow {
  tenant: TenantRow;
  // The subject's Member row's role; null where it has none (`everyTenant`).
  role: MemberRow["role"] | null;
}

export interface MembershipQuery {
  limit: number;
  // Keyset cursor on the tenant id (newest tenant first).
  beforeTenantId?: string;
  // Every tenant, not only those where the subject has a Member row.
  everyTenant?: boolean;
}

export interface MemberStore extends TenantRepo<MemberRow, MemberInsert> {
  findBySubject(tenantId: string, subject: string): Promise<MemberRow | undefined>;
  // The tenants of a subject's Member rows, across tenants, joined to the
  // tenants (an indexed lookup by subject, not a scan of every member).
  memberships(subject: string, query: MembershipQuery): Promise<MembershipRow[]>;
  // Removes a member or changes its role, unless that leaves the tenant with
  // no admin: the check and the write are one transaction. `row` is the
  // member as it was (remove) or is now (role change).
  change(tenantId: string, id: string, change: MemberChange): Promise<MemberChangeResult>;
}

export interface EventQuery extends ListQuery<EventRow> {
  receivedAfter?: number;
  receivedBefore?: number;
}

export interface EventStore extends TenantRepo<EventRow, EventInsert> {
  list(tenantId: string, query: EventQuery): Promise<EventRow[]>;
}

// A run's id is made when it is created (UUIDv7), so the creation window is
// a range of ids in each index the list reads (list-query.ts).
export interface RunQuery extends ListQuery<RunRow> {
  createdAfter?: number;
  createdBefore?: number;
}

export interface RunStore extends TenantRepo<RunRow, RunInsert> {
  list(tenantId: string, query: RunQuery): Promise<RunRow[]>;
  idsForEvent(tenantId: string, eventId: string): Promise<string[]>;
  // The runs of each of these events (a page of them), newest first, in one
  // query; events without runs are absent from the map.
  idsForEvents(tenantId: string, eventIds: string[]): Promise<Map<string, string[]>>;
  // Runs of the tenant waiting to be claimed.
  queuedCount(tenantId: string): Promise<number>;
  // Per tenant with queued runs: how many, and when the oldest was created
  // (metrics; read from the queued-runs index alone).
  queueStats(): Promise<QueueStats[]>;
}

export interface QueueStats {
  tenantId: string;
  queued: number;
  oldestCreateTime: number;
}

export interface IngestItem {
  event: EventInsert;
  // Runs queued by the event; committed with it or not at all.
  runs: RunInsert[];
  // Most queued runs the tenant may hold once these are queued, counted in
  // the transaction that inserts them (with what the same batch adds, and
  // under the tenant's queued-runs lock on PostgreSQL, so replicas too);
  // past it nothing of the item is stored and ingest rejects with
  // StoreQuotaError. Checked before duplicates: an event at the cap is
  // refused even when it repeats a stored key.
  maxQueuedRuns?: number;
}

export type IngestResult = { duplicate: false; eventId: string } | { duplicate: true; eventId: string };

export interface WebhookStore {
  // The source whose current token, or previous token still in its grace
  // period, has this digest.
  findSourceByTokenDigest(digest: string, now: number): Promise<WebhookSourceRow | undefined>;
  // The source with this id, in whichever tenant: a signed kind's deliveries
  // name their source in the URL and carry no tenant.
  findSourceById(id: string): Promise<WebhookSourceRow | undefined>;
  // Enabled webhook triggers of enabled agents, for this source or any source
  // of the tenant (an indexed lookup, not a scan of every trigger).
  matchCandidates(tenantId: string, sourceId: string): Promise<TriggerRow[]>;
  // Commits the event and its runs in one transaction, concurrent calls
  // grouped into one commit. An event whose (source, idempotency key) was
  // stored less than `idempotencyWindowMs` ago is a duplicate and stores nothing.
  ingest(item: IngestItem, idempotencyWindowMs: number): Promise<IngestResult>;
}

export interface RunOutcome {
  status: "succeeded" | "failed" | "timed_out";
  steps: RunRow["steps"];
  output?: unknown;
  error: string;
}

// What starting a run reads, handed out with it by an engine whose reads are
// round trips (PostgreSQL: in the claim's statement, instead of two reads
// per run): the event that queued it, and its agent's update time, which
// tells whether a copy of the agent held since is still current (null: the
// agent is gone). SQLite's claims carry none: its reads are calls, not round
// trips.
export interface ClaimContext {
  event: Pick<EventRow, "id" | "eventType" | "payload" | "sourceId" | "receiveTime"> | null;
  agentUpdateTime: number | null;
}

export interface ClaimedRun extends RunRow {
  context?: ClaimContext;
}

export interface RunQueue {
  // Leases up to `limit` runs, oldest first: queued runs, and running runs
  // whose lease expired (their worker died). Each claim is one attempt; a run
  // whose lease expired on its last attempt is failed instead. `executing`:
  // the runs this owner still executes, whose expired leases it must not
  // claim again (any other run of its own with an expired lease it may).
  // A run comes with the steps its earlier attempts recorded: the next
  // attempt keeps them and resumes from them (runtime/durable-steps.ts).
  claim(owner: string, limit: number, leaseMs: number, maxAttempts: number, now: number, executing: string[]): Promise<ClaimedRun[]>;
  // Extends the leases still held; returns the ids the owner still holds
  // (a cancelled run is no longer held).
  heartbeat(owner: string, ids: string[], leaseMs: number, now: number): Promise<Set<string>>;
  // Replaces the steps of a run the owner still holds (progress while it
  // runs); false when it does not. The steps are serialized before the call
  // returns, so the caller may go on changing them. This and finish move the
  // run's update_time forward (to `now`, or one past the last write within
  // the same millisecond), which is how watchers tell that a run changed.
  recordSteps(owner: string, id: string, steps: RunRow["steps"], now: number): Promise<boolean>;
  // Ends a run the owner still holds; false when it lost the lease or the run was cancelled.
  finish(owner: string, id: string, outcome: RunOutcome, now: number): Promise<boolean>;
  // Gives held runs back to the queue (graceful shutdown), refunding the attempt.
  release(owner: string, ids: string[], now: number): Promise<void>;
  // Cancels a run that is still queued or running; undefined when it is not
  // (already ended, or not in this tenant).
  cancel(tenantId: string, id: string, now: number): Promise<RunRow | undefined>;
  // The earliest lease expiry among running runs: when a dead worker's run
  // becomes claimable.
  nextLeaseExpiry(): Promise<number | undefined>;
  // Queues runs of one tenant, unless the tenant's queued runs would then
  // exceed `maxQueued` (checked in the same transaction); false when refused.
  insertMany(rows: RunInsert[], maxQueued?: number): Promise<boolean>;
}

// A schedule trigger with the time of its latest slot, fired or skipped
// (none yet: absent).
export type ScheduledTrigger = TriggerRow & { lastSlot?: number };

export interface ScheduleStore {
  // Enabled schedule triggers of enabled agents, across tenants, each with
  // its latest slot: one read a tick, whatever the number of triggers, and
  // one that other kinds of trigger do not make dearer.
  scheduleTriggers(): Promise<ScheduledTrigger[]>;
  // Records the slot and queues its run in one transaction: "taken" when the
  // slot already fired; "over_quota" when the tenant already has `maxQueued`
  // queued runs, in which case the slot is recorded without a run (skipped).
  fireSlot(triggerId: string, slotTime: number, run: RunInsert, maxQueued?: number): Promise<"fired" | "taken" | "over_quota">;
}

// Tables whose rows the service caches on the hot path (the webhook source by
// token digest, trigger candidates, schedule triggers).
export type CachedTable = "webhook_sources" | "triggers" | "agents";

// What other processes and replicas did, pushed by the store so that nothing
// above it polls: SQLite watches its file (data_version), PostgreSQL listens
// (LISTEN/NOTIFY). Each `on…` returns its unsubscribe.
export interface StoreSignals {
  // Runs became claimable somewhere (queued, released): claim again.
  onRunsQueued(listener: () => void): () => void;
  // Rows of a cached table changed somewhere, this process included; a cache
  // of it must be dropped. `undefined`: anything may have changed (the
  // notification connection was lost and is back).
  onChanged(listener: (table: CachedTable | undefined) => void): () => void;
  // A run was cancelled somewhere: the worker executing it aborts now rather
  // than at its next heartbeat.
  onRunCancelled(listener: (runId: string) => void): () => void;
  // Runs of the tenant were created or changed somewhere, this process
  // included (stream wake-ups; heartbeats do not count). A signal for every
  // tenant at once when the store cannot tell which (another process's
  // commit on SQLite, a lost notification connection).
  onRunsChanged(tenantId: string, listener: () => void): () => void;
  // Events of the tenant were stored somewhere, this process included; as
  // onRunsChanged.
  onEventsAdded(tenantId: string, listener: () => void): () => void;
  // Listeners of onRunsChanged and onEventsAdded registered now: each open
  // stream holds one, released when it ends.
  tenantListeners(): number;
}

// `granted`: tokens taken, at least 1 and at most the `want` asked for.
// `retryAfterMs`: until the bucket holds one token again.
export type RateLimitResult = { ok: true; granted: number } | { ok: false; retryAfterMs: number };

// Up to `want` tokens from the bucket `key`, refilled at `ratePerSecond` and
// holding at most `burst`.
export interface BucketTake {
  key: string;
  ratePerSecond: number;
  burst: number;
  want: number;
}

export interface RateLimitStore {
  // Takes from each bucket (one for every process and replica on the
  // database) in one transaction, answering in the order asked; a take is
  // refused when its bucket holds less than one token. Keys are distinct:
  // a process has one take of a key in flight at a time. Batched because a
  // call per key was a transaction per busy webhook source every 50 ms or so
  // (service/rate-limit.ts), beside the ingest's commits.
  take(takes: BucketTake[], now: number): Promise<RateLimitResult[]>;
}

export interface PruneResult {
  events: number;
  runs: number;
  // Schedule slots older than the cutoff, each trigger's latest kept.
  slots: number;
  // Rate-limit buckets untouched since the cutoff (full again by then).
  buckets: number;
  // Overview rollup rows of slots wholly before the cutoff (store/overview.ts).
  rollups: number;
}

export interface RetentionStore {
  // Deletes, oldest first, at most `batch` runs that ended before `before`,
  // at most `batch` events received before it with no runs left, and as many
  // stale slots, buckets and overview rollup rows (each tenant's sealed range
  // then starts at the first slot not wholly before `before`: the rollups of a
  // slot the cutoff cuts count the runs deleted in it until the next round,
  // when the cutoff has moved past it). Undefined when another process is
  // pruning now.
  prune(before: number, batch: number): Promise<PruneResult | undefined>;
}

export interface Store {
  tenants: TenantStore;
  members: MemberStore;
  agents: TenantRepo<AgentRow, AgentInsert>;
  skills: TenantRepo<SkillRow, SkillInsert>;
  triggers: TenantRepo<TriggerRow, TriggerInsert>;
  webhookSources: TenantRepo<WebhookSourceRow, WebhookSourceInsert>;
  events: EventStore;
  runs: RunStore;
  webhooks: WebhookStore;
  queue: RunQueue;
  schedules: ScheduleStore;
  signals: StoreSignals;
  rateLimits: RateLimitStore;
  retention: RetentionStore;
  overview: OverviewStore;
  // Throws StoreUnavailableError when the database cannot answer.
  ping(): Promise<void>;
  close(): Promise<void>;
}
