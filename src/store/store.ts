// The store contract the service layer depends on. Every call is async so
// that a PostgreSQL implementation of the same schema can stand in for SQLite.
import type {
  AgentRow,
  EventRow,
  MemberRow,
  RunRow,
  SkillRow,
  TenantRow,
  TriggerRow,
  WebhookSourceRow,
  agents,
  events,
  members,
  runs,
  skills,
  tenants,
  triggers,
  webhookSources,
} from "./schema.js";

export interface ListQuery<Row> {
  limit: number;
  // Keyset cursor: only rows whose id sorts before this one (newest first).
  beforeId?: string;
  // Equality filters; undefined values are ignored.
  where?: Partial<Row>;
}

export interface TenantRepo<Row, Insert> {
  list(tenantId: string, query: ListQuery<Row>): Promise<Row[]>;
  get(tenantId: string, id: string): Promise<Row | undefined>;
  insert(row: Insert): Promise<Row>;
  update(tenantId: string, id: string, patch: Partial<Insert>): Promise<Row | undefined>;
  delete(tenantId: string, id: string): Promise<boolean>;
}

export interface TenantStore {
  insert(row: typeof tenants.$inferInsert): Promise<TenantRow>;
  // By id (`ten_…`) or slug.
  get(idOrSlug: string): Promise<TenantRow | undefined>;
  list(query: ListQuery<TenantRow>): Promise<TenantRow[]>;
  update(id: string, patch: Partial<typeof tenants.$inferInsert>): Promise<TenantRow | undefined>;
}

export interface MemberStore extends TenantRepo<MemberRow, typeof members.$inferInsert> {
  findBySubject(tenantId: string, subject: string): Promise<MemberRow | undefined>;
}

export interface EventQuery extends ListQuery<EventRow> {
  receivedAfter?: number;
  receivedBefore?: number;
}

export interface EventStore extends TenantRepo<EventRow, typeof events.$inferInsert> {
  list(tenantId: string, query: EventQuery): Promise<EventRow[]>;
}

export interface RunStore extends TenantRepo<RunRow, typeof runs.$inferInsert> {
  idsForEvent(tenantId: string, eventId: string): Promise<string[]>;
}

export interface Store {
  tenants: TenantStore;
  members: MemberStore;
  agents: TenantRepo<AgentRow, typeof agents.$inferInsert>;
  skills: TenantRepo<SkillRow, typeof skills.$inferInsert>;
  triggers: TenantRepo<TriggerRow, typeof triggers.$inferInsert>;
  webhookSources: TenantRepo<WebhookSourceRow, typeof webhookSources.$inferInsert>;
  events: EventStore;
  runs: RunStore;
  // Throws StoreUnavailableError when the database cannot answer.
  ping(): Promise<void>;
  close(): Promise<void>;
}
