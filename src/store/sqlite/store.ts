import { isMainThread } from "node:worker_threads";
import type Database from "better-sqlite3";
import { Column, and, eq, getTableColumns, getTableName } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { run, toStoreError } from "./errors.js";
import { probeWritable } from "./readiness.js";
import { byEvent } from "../runs-by-event.js";
import { createSqliteMemberChange, createSqliteMemberships } from "./members.js";
import type { GroupCommitOptions } from "../group-commit.js";
import { createSqliteWebhookStore } from "./ingest.js";
import { WriterThread } from "./writer.js";
import { createSqliteRunQueue, prepareQueuedCount, prepareQueueStats } from "./queue.js";
import { createSqliteRateLimits } from "./rate-limits.js";
import { createSqliteOverview } from "./overview.js";
import { createSqliteRetention } from "./retention.js";
import { createSqliteScheduleStore } from "./schedules.js";
import type * as rows from "../rows.js";
import * as schema from "./schema.js";
import { WAL_CHECKPOINT_PAGES, type SqliteOptions } from "./connection.js";
import { migrateSqlite, openSqlite, type Db } from "./open.js";
import { SqliteSignals, type SqliteSignalOptions } from "./signals.js";
import { listStatement, RUN_LIST_SPLIT, runListConditions, type ExtraCondition, type LiteralFilter, type SplitList } from "../list-query.js";
import { signalled } from "../signalled.js";
import type { EventQuery, Store, TenantRepo } from "../store.js";

interface TenantScopedTable extends SQLiteTable {
  id: SQLiteColumn;
  tenantId: SQLiteColumn;
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

// Reads go through statements prepared once (on first use) instead of a
// Drizzle query built and compiled per call. Rows come back as arrays and are
// decoded per column exactly as Drizzle's select does (null stays null,
// anything else through the column's mapFromDriverValue: JSON.parse for json
// columns, `=== 1` for booleans), into the same keys in the same order.
interface TableReader<Row> {
  table: string;
  // The select list, every column of the table in schema order.
  columns: string;
  column(key: string): SQLiteColumn | undefined;
  // A column's place in `columns`, from 1.
  position(column: SQLiteColumn): number;
  decode(values: unknown[]): Row;
  prepare(sql: string): Database.Statement<unknown[], unknown[]>;
}

function tableReader<Row>(raw: Database.Database, table: SQLiteTable): TableReader<Row> {
  const entries = Object.entries(getTableColumns(table)) as [string, SQLiteColumn][];
  const keys = entries.map(([key]) => key);
  const decoders = entries.map(([, column]) =>
    column.mapFromDriverValue === Column.prototype.mapFromDriverValue ? undefined : (v: unknown) => column.mapFromDriverValue(v),
  );
  const byKey = new Map(entries);
  const name = quote(getTableName(table));
  return {
    table: name,
    columns: entries.map(([, column]) => `${name}.${quote(column.name)}`).join(", "),
    column: (key) => byKey.get(key),
    position: (column) => entries.findIndex(([, c]) => c === column) + 1,
    decode(values) {
      const row: Record<string, unknown> = {};
      for (let i = 0; i < keys.length; i++) {
        const v = values[i];
        const decoder = decoders[i];
        row[keys[i]!] = v === null ? null : decoder ? decoder(v) : v;
      }
      return row as Row;
    },
    prepare: (sql) => raw.prepare<unknown[], unknown[]>(sql).raw(true),
  };
}

// A statement prepared on first use, so a store opened on a database that is
// not migrated yet fails per call, as a Drizzle query would, not at creation.
function lazy<S>(prepare: () => S): () => S {
  let stmt: S | undefined;
  return () => (stmt ??= prepare());
}

const MAX_LIST_SHAPES = 256;

function tenantRepo<T extends TenantScopedTable, Row, Insert>(
  db: Db,
  raw: Database.Database,
  table: T,
  extra: (ExtraCondition<SQLiteColumn> | LiteralFilter)[] = [],
  split?: SplitList<Row>,
) {
  const reader = tableReader<Row>(raw, table);
  const col = (c: SQLiteColumn) => `${reader.table}.${quote(c.name)}`;
  const select = `select ${reader.columns} from ${reader.table}`;
  const listed = { id: table.id, tenantId: table.tenantId, column: reader.column, col, position: reader.position };
  const getStmt = lazy(() => reader.prepare(`${select} where ${col(table.tenantId)} = ? and ${col(table.id)} = ?`));
  // One statement per combination of conditions present (the filter keys a
  // service passes are fixed in code, so there are few).
  const listStmts = new Map<string, Database.Statement<unknown[], unknown[]>>();
  const byId = (tenantId: string, id: string) => and(eq(table.tenantId, tenantId), eq(table.id, id));
  const countStmt = lazy(() =>
    raw.prepare<[string], number>(`select count(*) from ${reader.table} where ${col(table.tenantId)} = ?`).pluck(true),
  );
  const insert = (row: Insert) => db.insert(table).values(row as T["$inferInsert"]).returning().get() as Row;
  // Immediate: the write lock is taken before the count, so two processes
  // cannot both count below the limit and both insert.
  const insertWithin = raw.transaction((row: Insert, limit: number) =>
    countStmt().get((row as { tenantId: string }).tenantId)! >= limit ? undefined : insert(row),
  );
  const repo: TenantRepo<Row, Insert> = {
    list: (tenantId, query) =>
      run(() => {
        const { text: sql, params } = listStatement(listed, extra, () => "?", select, tenantId, query, split);
        let stmt = listStmts.get(sql);
        if (!stmt) {
          if (listStmts.size >= MAX_LIST_SHAPES) listStmts.clear();
          stmt = reader.prepare(sql);
          listStmts.set(sql, stmt);
        }
        return stmt.all(params).map(reader.decode);
      }),
    get: (tenantId, id) =>
      run(() => {
        const values = getStmt().get(tenantId, id);
        return values && reader.decode(values);
      }),
    insert: (row) => run(() => insert(row)),
    insertWithin: (row, limit) => run(() => insertWithin.immediate(row, limit)),
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
  return { repo, reader, col };
}

export interface SqliteStoreOptions extends SqliteOptions {
  migrate?: boolean;
  groupCommit?: GroupCommitOptions;
  signals?: SqliteSignalOptions;
}

export function createSqliteStore(options: SqliteStoreOptions): Store & { db: Db } {
  // A checkpoint runs in the connection whose commit finds the WAL past its
  // threshold, and copies up to ~40 MB: on the HTTP thread that would hold
  // every request. Its connection checkpoints only when nobody else did
  // (the writer thread, runtime threads and other processes commit far
  // more often), so the WAL stays bounded even where it writes alone.
  const { db, raw } = openSqlite(options, isMainThread ? 4 * WAL_CHECKPOINT_PAGES : WAL_CHECKPOINT_PAGES);
  if (options.migrate !== false) migrateSqlite(db, raw);
  const { tenants, members, agents, skills, triggers, webhookSources, events, runs } = schema;

  const tenantReader = tableReader<rows.TenantRow>(raw, tenants);
  const tenantCol = (c: SQLiteColumn) => `${tenantReader.table}.${quote(c.name)}`;
  const tenantSelect = `select ${tenantReader.columns} from ${tenantReader.table}`;
  const tenantByIdOrSlug = lazy(() =>
    tenantReader.prepare(`${tenantSelect} where (${tenantCol(tenants.id)} = ? or ${tenantCol(tenants.slug)} = ?)`),
  );
  const tenantOrder = `order by ${tenantCol(tenants.id)} desc limit ?`;
  const tenantPage = lazy(() => tenantReader.prepare(`${tenantSelect} ${tenantOrder}`));
  const tenantPageBefore = lazy(() => tenantReader.prepare(`${tenantSelect} where ${tenantCol(tenants.id)} < ? ${tenantOrder}`));

  const memberRepo = tenantRepo<typeof members, rows.MemberRow, typeof members.$inferInsert>(db, raw, members);
  const memberBySubject = lazy(() =>
    memberRepo.reader.prepare(
      `select ${memberRepo.reader.columns} from ${memberRepo.reader.table}
       where ${memberRepo.col(members.tenantId)} = ? and ${memberRepo.col(members.subject)} = ?`,
    ),
  );
  const runRepo = tenantRepo<typeof runs, rows.RunRow, typeof runs.$inferInsert>(db, raw, runs, runListConditions(runs.id), RUN_LIST_SPLIT);
  const runIdsForEvent = lazy(() =>
    raw
      .prepare<[string, string], string>(
        `select ${runRepo.col(runs.id)} from ${runRepo.reader.table} indexed by runs_event
         where ${runRepo.col(runs.tenantId)} = ? and ${runRepo.col(runs.eventId)} = ? order by ${runRepo.col(runs.id)} desc`,
      )
      .pluck(true),
  );
  // The ids as one JSON array parameter: one statement for any page size.
  // runs_event is named for both: without statistics SQLite takes the
  // tenant's prefix of runs_agent for a list of events and walks every run
  // of the tenant.
  const runIdsForEvents = lazy(() =>
    raw.prepare<[string, string], { id: string; eventId: string }>(
      `select ${runRepo.col(runs.id)} as id, ${runRepo.col(runs.eventId)} as eventId from ${runRepo.reader.table} indexed by runs_event
       where ${runRepo.col(runs.tenantId)} = ? and ${runRepo.col(runs.eventId)} in (select value from json_each(?))
       order by ${runRepo.col(runs.id)} desc`,
    ),
  );

  const queuedCount = lazy(() => prepareQueuedCount(raw));
  const queueStats = lazy(() => prepareQueueStats(raw));
  // A database file's ingest commits and rate-limit buckets are written on
  // a thread of their own (writer.ts); an in-memory database is one
  // connection's alone.
  const writer = options.path === ":memory:" ? undefined : new WriterThread(options);
  const signals = new SqliteSignals(raw, options.signals, writer);
  // A run the writer thread committed is claimable at once, but this process
  // says it was queued (its "run queued" line, its signals) when it handles
  // the writer's answer: a claim here waits for the answers to the writes in
  // flight when it was asked for, so no worker of this thread starts a run
  // before then (as the signals wait, signals.ts). One commit's wait at most.
  const runQueue = createSqliteRunQueue(raw);
  const queue: typeof runQueue = writer
    ? { ...runQueue, claim: (...args) => new Promise<void>((answered) => writer.afterInFlight(answered)).then(() => runQueue.claim(...args)) }
    : runQueue;

  // This process's writes are signalled to it as they commit; other
  // processes' are seen by SqliteSignals.
  const store = signalled(
    {
    tenants: {
      insert: (row) => run(() => db.insert(tenants).values(row).returning().get()),
      get: (idOrSlug) =>
        run(() => {
          const values = tenantByIdOrSlug().get(idOrSlug, idOrSlug);
          return values && tenantReader.decode(values);
        }),
      list: (query) =>
        run(() =>
          (query.beforeId ? tenantPageBefore().all(query.beforeId, query.limit) : tenantPage().all(query.limit)).map(
            tenantReader.decode,
          ),
        ),
      update: (id, patch) => run(() => db.update(tenants).set(patch).where(eq(tenants.id, id)).returning().get()),
    },
    members: {
      ...memberRepo.repo,
      findBySubject: (tenantId, subject) =>
        run(() => {
          const values = memberBySubject().get(tenantId, subject);
          return values && memberRepo.reader.decode(values);
        }),
      change: createSqliteMemberChange(raw),
      memberships: createSqliteMemberships(raw),
    },
    agents: tenantRepo<typeof agents, rows.AgentRow, typeof agents.$inferInsert>(db, raw, agents).repo,
    skills: tenantRepo<typeof skills, rows.SkillRow, typeof skills.$inferInsert>(db, raw, skills).repo,
    triggers: tenantRepo<typeof triggers, rows.TriggerRow, typeof triggers.$inferInsert>(db, raw, triggers).repo,
    webhookSources: tenantRepo<typeof webhookSources, rows.WebhookSourceRow, typeof webhookSources.$inferInsert>(db, raw, webhookSources).repo,
    events: tenantRepo<typeof events, rows.EventRow, typeof events.$inferInsert>(db, raw, events, [
      { key: "receivedAfter" satisfies keyof EventQuery, column: events.receiveTime, op: ">=" },
      { key: "receivedBefore" satisfies keyof EventQuery, column: events.receiveTime, op: "<" },
    ]).repo,
    runs: {
      ...runRepo.repo,
      idsForEvent: (tenantId, eventId) => run(() => runIdsForEvent().all(tenantId, eventId)),
      idsForEvents: (tenantId, eventIds) => run(() => byEvent(eventIds.length ? runIdsForEvents().all(tenantId, JSON.stringify(eventIds)) : [])),
      queuedCount: (tenantId) => run(() => queuedCount().get(tenantId)!),
      queueStats: () => run(() => queueStats()()),
    },
    webhooks: createSqliteWebhookStore(raw, options.groupCommit ?? { windowMs: 0, maxBatch: 256 }, writer),
    queue,
    schedules: createSqliteScheduleStore(raw),
    signals,
    rateLimits: writer ? { take: (...args) => writer.take(...args) } : createSqliteRateLimits(raw),
    retention: createSqliteRetention(raw),
    overview: createSqliteOverview(raw),
    ping: () => probeWritable(raw).catch((err: unknown) => Promise.reject(toStoreError(err))),
    close: async () => {
      await writer?.close();
      return run(() => {
        signals.close();
        raw.close();
      });
    },
    },
    signals,
  );
  return { ...store, db };
}
