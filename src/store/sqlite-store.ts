import { and, desc, eq, gte, lt, or, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { run } from "./sqlite-errors.js";
import { createSqliteWebhookStore, type GroupCommitOptions } from "./sqlite-ingest.js";
import { createSqliteRunQueue } from "./sqlite-queue.js";
import { createSqliteScheduleStore } from "./sqlite-schedules.js";
import * as schema from "./schema.js";
import { migrateSqlite, openSqlite, type Db, type SqliteOptions } from "./sqlite.js";
import type { EventQuery, ListQuery, Store, TenantRepo } from "./store.js";

interface TenantScopedTable extends SQLiteTable {
  id: SQLiteColumn;
  tenantId: SQLiteColumn;
}

function equalities(table: SQLiteTable, where: object | undefined): SQL[] {
  const conds: SQL[] = [];
  for (const [key, value] of Object.entries(where ?? {})) {
    if (value === undefined) continue;
    const column = (table as unknown as Record<string, SQLiteColumn>)[key];
    if (!column) throw new Error(`unknown filter column ${key}`);
    conds.push(eq(column, value));
  }
  return conds;
}

function tenantRepo<T extends TenantScopedTable, Row, Insert>(db: Db, table: T, extra: (q: never) => SQL[] = () => []) {
  const listConds = (tenantId: string, query: ListQuery<Row>): SQL[] => [
    eq(table.tenantId, tenantId),
    ...(query.beforeId ? [lt(table.id, query.beforeId)] : []),
    ...equalities(table, query.where),
    ...extra(query as never),
  ];
  const byId = (tenantId: string, id: string) => and(eq(table.tenantId, tenantId), eq(table.id, id));
  const repo: TenantRepo<Row, Insert> = {
    list: (tenantId, query) =>
      run(
        () =>
          db
            .select()
            .from(table as SQLiteTable)
            .where(and(...listConds(tenantId, query)))
            .orderBy(desc(table.id))
            .limit(query.limit)
            .all() as Row[],
      ),
    get: (tenantId, id) =>
      run(() => db.select().from(table as SQLiteTable).where(byId(tenantId, id)).get() as Row | undefined),
    insert: (row) => run(() => db.insert(table).values(row as T["$inferInsert"]).returning().get() as Row),
    update: (tenantId, id, patch) =>
      run(
        () =>
          db
            .update(table)
            .set(patch as Partial<T["$inferInsert"]>)
            .where(byId(tenantId, id))
            .returning()
            .get() as Row | undefined,
      ),
    delete: (tenantId, id) => run(() => db.delete(table).where(byId(tenantId, id)).run().changes > 0),
  };
  return repo;
}

export interface SqliteStoreOptions extends SqliteOptions {
  migrate?: boolean;
  groupCommit?: GroupCommitOptions;
}

export function createSqliteStore(options: SqliteStoreOptions): Store & { db: Db } {
  const { db, raw } = openSqlite(options);
  if (options.migrate !== false) migrateSqlite(db);
  const { tenants, members, agents, skills, triggers, webhookSources, events, runs } = schema;
  const ping = raw.prepare("select 1");

  return {
    db,
    tenants: {
      insert: (row) => run(() => db.insert(tenants).values(row).returning().get()),
      get: (idOrSlug) =>
        run(() =>
          db
            .select()
            .from(tenants)
            .where(or(eq(tenants.id, idOrSlug), eq(tenants.slug, idOrSlug)))
            .get(),
        ),
      list: (query) =>
        run(() =>
          db
            .select()
            .from(tenants)
            .where(query.beforeId ? lt(tenants.id, query.beforeId) : undefined)
            .orderBy(desc(tenants.id))
            .limit(query.limit)
            .all(),
        ),
      update: (id, patch) => run(() => db.update(tenants).set(patch).where(eq(tenants.id, id)).returning().get()),
    },
    members: {
      ...tenantRepo<typeof members, schema.MemberRow, typeof members.$inferInsert>(db, members),
      findBySubject: (tenantId, subject) =>
        run(() =>
          db
            .select()
            .from(members)
            .where(and(eq(members.tenantId, tenantId), eq(members.subject, subject)))
            .get(),
        ),
    },
    agents: tenantRepo(db, agents),
    skills: tenantRepo(db, skills),
    triggers: tenantRepo(db, triggers),
    webhookSources: tenantRepo(db, webhookSources),
    events: tenantRepo<typeof events, schema.EventRow, typeof events.$inferInsert>(db, events, (q: EventQuery) => [
      ...(q.receivedAfter !== undefined ? [gte(events.receiveTime, q.receivedAfter)] : []),
      ...(q.receivedBefore !== undefined ? [lt(events.receiveTime, q.receivedBefore)] : []),
    ]),
    runs: {
      ...tenantRepo<typeof runs, schema.RunRow, typeof runs.$inferInsert>(db, runs),
      idsForEvent: (tenantId, eventId) =>
        run(() =>
          db
            .select({ id: runs.id })
            .from(runs)
            .where(and(eq(runs.tenantId, tenantId), eq(runs.eventId, eventId)))
            .orderBy(desc(runs.id))
            .all()
            .map((r) => r.id),
        ),
    },
    webhooks: createSqliteWebhookStore(db, raw, options.groupCommit ?? { windowMs: 0, maxBatch: 256 }),
    queue: createSqliteRunQueue(raw),
    schedules: createSqliteScheduleStore(raw),
    ping: () => run(() => void ping.get()),
    close: () => run(() => void raw.close()),
  };
}
