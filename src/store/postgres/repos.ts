import { and, count, eq, getTableColumns, getTableName } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";
import { within } from "./deadline.js";
import { pg } from "./errors.js";
import { lockTenantScope } from "./locks.js";
import type { Db, Sql } from "./open.js";
import type { RunInsert, RunRow, TenantRow } from "../rows.js";
import { listStatement, RUN_LIST_SPLIT, runListConditions, type ExtraCondition, type LiteralFilter, type SplitList } from "../list-query.js";
import type { ListQuery, TenantRepo, TenantStore } from "../store.js";
import * as schema from "./schema.js";

interface TenantScopedTable extends PgTable {
  id: PgColumn;
  tenantId: PgColumn;
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

// Reads are plain SQL prepared once per connection (postgres.js prepares
// every query and keeps the statement): every column in schema order, named
// as the Drizzle row shape names it. postgres.js already decodes each column
// as Drizzle would (jsonb parsed, int8 as a number, booleans), so rows need
// no mapping.
export interface TableReader {
  table: string;
  // The table's columns, each named as its row's key.
  columns: string;
  select: string;
  column(key: string): PgColumn | undefined;
  col(column: PgColumn): string;
  position(column: PgColumn): number;
}

export function tableReader(table: PgTable): TableReader {
  const entries = Object.entries(getTableColumns(table));
  const name = quote(getTableName(table));
  const byKey = new Map(entries);
  const list = entries.map(([key, c]) => `${name}.${quote(c.name)}${c.name === key ? "" : ` as ${quote(key)}`}`).join(", ");
  return {
    table: name,
    columns: list,
    select: `select ${list} from ${name}`,
    column: (key) => byKey.get(key),
    col: (c) => `${name}.${quote(c.name)}`,
    position: (c) => entries.findIndex(([, e]) => e === c) + 1,
  };
}

export function tenantRepo<T extends TenantScopedTable, Row, Insert>(
  sql: Sql,
  db: Db,
  table: T,
  // Reads are cancelled past it (see deadline.ts).
  timeoutMs: number,
  extra: (ExtraCondition<PgColumn> | LiteralFilter)[] = [],
  split?: SplitList<Row>,
): { repo: TenantRepo<Row, Insert>; reader: TableReader } {
  const reader = tableReader(table);
  const { col } = reader;
  const listed = { ...reader, id: table.id, tenantId: table.tenantId };
  const get = `${reader.select} where ${col(table.tenantId)} = $1 and ${col(table.id)} = $2`;
  const byId = (tenantId: string, id: string) => and(eq(table.tenantId, tenantId), eq(table.id, id));
  const name = getTableName(table);
  const repo: TenantRepo<Row, Insert> = {
    list: (tenantId, query) =>
      pg(async () => {
        const { text, params } = listStatement(listed, extra, (n) => `$${n}`, reader.select, tenantId, query, split);
        return [...(await within(sql.unsafe(text, params as never[], { prepare: true }), timeoutMs))] as Row[]; // rows already in the Row shape (see tableReader)
      }),
    get: (tenantId, id) => pg(async () => (await within(sql.unsafe(get, [tenantId, id], { prepare: true }), timeoutMs))[0] as Row | undefined),
    insert: (row) => pg(async () => (await db.insert(table).values(row as T["$inferInsert"]).returning())[0] as Row),
    // The count and the insert under one transaction-scoped lock per (table,
    // tenant): inserts of other replicas wait, so none counts below the limit
    // while another's insert is uncommitted.
    insertWithin: (row, limit) =>
      pg(() =>
        db.transaction(async (tx) => {
          const tenantId = (row as { tenantId: string }).tenantId;
          await lockTenantScope(tx, name, tenantId);
          const [{ n }] = (await tx.select({ n: count() }).from(table as PgTable).where(eq(table.tenantId, tenantId))) as [{ n: number }];
          if (n >= limit) return undefined;
          return (await tx.insert(table).values(row as T["$inferInsert"]).returning())[0] as Row;
        }),
      ),
    update: (tenantId, id, patch) =>
      pg(
        async () =>
          (await db.update(table).set(patch as Partial<T["$inferInsert"]>).where(byId(tenantId, id)).returning())[0] as Row | undefined,
      ),
    delete: (tenantId, id) => pg(async () => (await db.delete(table).where(byId(tenantId, id)).returning({ id: table.id })).length > 0),
  };
  return { repo, reader };
}

export function tenantStore(sql: Sql, db: Db, timeoutMs: number): TenantStore {
  const { tenants } = schema;
  const reader = tableReader(tenants);
  const order = `order by ${reader.col(tenants.id)} desc`;
  return {
    insert: (row) => pg(async () => (await db.insert(tenants).values(row).returning())[0]!),
    get: (idOrSlug) =>
      pg(async () => {
        const [row] = await within(
          sql.unsafe(`${reader.select} where ${reader.col(tenants.id)} = $1 or ${reader.col(tenants.slug)} = $1`, [idOrSlug], { prepare: true }),
          timeoutMs,
        );
        return row as TenantRow | undefined;
      }),
    list: (query: ListQuery<TenantRow>) =>
      pg(async () => {
        const rows = await within(
          query.beforeId
            ? sql.unsafe<TenantRow[]>(`${reader.select} where ${reader.col(tenants.id)} < $1 ${order} limit $2`, [query.beforeId, query.limit], { prepare: true })
            : sql.unsafe<TenantRow[]>(`${reader.select} ${order} limit $1`, [query.limit], { prepare: true }),
          timeoutMs,
        );
        return [...rows];
      }),
    update: (id, patch) => pg(async () => (await db.update(tenants).set(patch).where(eq(tenants.id, id)).returning())[0]),
  };
}

// Runs, with the runs list's conditions (list-query.ts).
export const createRunRepo = (sql: Sql, db: Db, timeoutMs: number) =>
  tenantRepo<typeof schema.runs, RunRow, RunInsert>(sql, db, schema.runs, timeoutMs, runListConditions(schema.runs.id), RUN_LIST_SPLIT);
