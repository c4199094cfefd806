// A tenant's list page as SQL, for either engine: the keyset conditions, the
// filters and the order of TenantRepo.list.
import type { Column } from "drizzle-orm";
import { idFloor } from "../lib/ids.js";
import type { RunRow } from "./rows.js";
import { RUN_CHANGED, RUN_GROUPS, runStatusCondition } from "./run-conditions.js";
import type { ListQuery, RunQuery } from "./store.js";
import { RUN_STATUSES } from "./types.js";

// Range conditions a list accepts besides the equality filters, e.g. the
// receive-time window of events: `query[key] op column`.
export interface ExtraCondition<C extends Column> {
  key: string;
  column: C;
  op: ">=" | "<";
  // The bound as the column holds it, when the query names it otherwise
  // (a creation time as the least run id made at that time).
  bound?: (value: unknown) => unknown;
}

// An equality filter of `query.where` written out as literal SQL: for a
// column whose rows are split over partial indexes. Either engine's planner
// takes a partial index only for a query that states its condition (a bound
// parameter proves nothing), in the same words for SQLite.
export interface LiteralFilter {
  key: string;
  sql(value: unknown): string;
}

// The runs list's status filter, in the words of the index that holds the
// status (run-conditions.ts). The status is checked against the known ones
// before it is written out.
const RUN_STATUS_FILTER: LiteralFilter = {
  key: "status",
  sql(value) {
    const status = RUN_STATUSES.find((s) => s === value);
    if (!status) throw new Error(`unknown run status ${JSON.stringify(value)}`);
    return runStatusCondition(status);
  },
};

// The runs list's conditions beside its equality filters, on either engine's
// `runs.id`: the creation window, an id range (run ids are UUIDv7 made at
// creation), and the status filter.
export const runListConditions = <C extends Column>(id: C): (ExtraCondition<C> | LiteralFilter)[] => [
  { key: "createdAfter" satisfies keyof RunQuery, column: id, op: ">=", bound: (ms) => idFloor("run", ms as number) },
  { key: "createdBefore" satisfies keyof RunQuery, column: id, op: "<", bound: (ms) => idFloor("run", ms as number) },
  RUN_STATUS_FILTER,
];

// A list read in parts, each with its own conditions (written as they are,
// to name a partial index), in one statement: each part a subquery with the
// list's order and limit, their union ordered and limited again. One
// statement reads one snapshot, so a row that moves from one part to another
// meanwhile (a run claimed) is read once, and each part's index is walked
// for one page at most.
export interface SplitList<Row> {
  // The parts of this query, or undefined to read it whole.
  parts(query: ListQuery<Row>): { query: ListQuery<Row>; condition: string }[] | undefined;
}

// A tenant's runs: the runs list and the change feed, read in parts over the
// partial indexes that hold each run once (the engines' schema.ts).
//
// By id (the list, newest first or after an id), with no status or agent
// filter: a part per status (RUN_GROUPS), each a range of runs_queued,
// runs_running or runs_status. No index of every run of a tenant by id is
// kept: ingest would write a page of it per tenant in each commit
// (bench/README, `tenants`). A status filter reads its own part, an agent
// filter runs_agent, whole.
//
// The change feed (WatchRuns: after `updateTime`), in three parts:
// - runs that ended or changed since they were queued, by (update_time, id)
//   on runs_changes, which is partial on exactly those, in its words;
// - queued and running runs not changed since they were queued, by id on
//   runs_queued and runs_running: a run's id is made at its create_time
//   (queued-run.ts), so for these the id order is the (update_time, id)
//   order, and ids from the cursor's millisecond on are the rows after it.
// So a run's insert writes no runs_changes entry, and its claim one (not a
// move): runs_changes was the fourth index ingest wrote a page of per tenant.
// A status filter leaves out the parts that cannot hold its runs.
export const RUN_LIST_SPLIT: SplitList<RunRow> = {
  parts(query) {
    if (query.after?.by === "updateTime") return changeParts(query, query.after.value ?? 0, query.after.id);
    if (query.where?.status !== undefined || query.where?.agentId !== undefined) return undefined;
    return RUN_GROUPS.map((condition) => ({ query, condition }));
  },
};

function changeParts(query: ListQuery<RunRow>, value: number, id: string) {
  const changed = { query, condition: `(${RUN_CHANGED})` };
  // The first id after the cursor (value, id) among ids made at their row's
  // update_time: after `id` within the cursor's millisecond, else from the
  // millisecond's first id (or the next one's, for a cursor id made later).
  const floor = idFloor("run", value);
  const next = idFloor("run", value + 1);
  const within = id < next ? id : next;
  const after = within > floor ? within : floor;
  const unchanged = (["queued", "running"] as const)
    .filter((status) => query.where?.status === undefined || query.where.status === status)
    .map((status) => ({ query: { ...query, after: { id: after } }, condition: `status = '${status}' and update_time = create_time` }));
  return [changed, ...unchanged];
}

// The table's columns as the engine names them in SQL.
export interface ListedTable<C extends Column> {
  id: C;
  tenantId: C;
  // The column of a row key; undefined for a key that is none.
  column(key: string): C | undefined;
  // A column, qualified by its table, quoted.
  col(column: C): string;
  // A column's place in the engine's select list of the table, from 1.
  position(column: C): number;
}

// A parameter bound as Drizzle binds a value for the column (JSON text for a
// JSON column: both drivers pass it through as given).
const encode = (column: Column, value: unknown): unknown => (value === null ? null : column.mapToDriverValue(value));

// What follows `select … from table`: `where … order by … limit …`, with its
// parameters in order. `placeholder(n)` is the engine's n-th parameter (`$n`
// or `?`). The filter keys a service passes are fixed in code, so the texts
// are few, and each engine prepares each once.
function listQuery<C extends Column, Row>(
  table: ListedTable<C>,
  extra: (ExtraCondition<C> | LiteralFilter)[],
  placeholder: (n: number) => string,
  tenantId: string,
  query: ListQuery<Row>,
  // A part's own condition (SplitList), as written.
  condition?: string,
): { text: string; params: unknown[] } {
  const { col } = table;
  const params: unknown[] = [tenantId];
  const bind = (value: unknown) => placeholder(params.push(value));
  const conds = [`${col(table.tenantId)} = ${placeholder(1)}`];
  if (condition) conds.push(condition);
  if (query.beforeId) conds.push(`${col(table.id)} < ${bind(query.beforeId)}`);
  let order = `${col(table.id)} desc`;
  if (query.after) {
    const by = query.after.by === undefined ? undefined : table.column(query.after.by);
    if (query.after.by !== undefined && !by) throw new Error(`unknown order column ${query.after.by}`);
    // A row comparison: an index on (tenant_id, by, id) serves it as one range.
    if (by) conds.push(`(${col(by)}, ${col(table.id)}) > (${bind(query.after.value ?? 0)}, ${bind(query.after.id)})`);
    else conds.push(`${col(table.id)} > ${bind(query.after.id)}`);
    order = by ? `${col(by)}, ${col(table.id)}` : col(table.id);
  }
  for (const [key, value] of Object.entries(query.where ?? {})) {
    if (value === undefined) continue;
    const literal = extra.find((e): e is LiteralFilter => "sql" in e && e.key === key);
    if (literal) {
      conds.push(literal.sql(value));
      continue;
    }
    const column = table.column(key);
    if (!column) throw new Error(`unknown filter column ${key}`);
    conds.push(`${col(column)} = ${bind(encode(column, value))}`);
  }
  for (const { key, column, op, bound = (v: unknown) => v } of extra.filter((e): e is ExtraCondition<C> => !("sql" in e))) {
    const value = (query as unknown as Record<string, unknown>)[key];
    if (value === undefined) continue;
    conds.push(`${col(column)} ${op} ${bind(encode(column, bound(value)))}`);
  }
  return { text: `where ${conds.join(" and ")} order by ${order} limit ${bind(query.limit)}`, params };
}

// The whole list statement: `select` (every column of the table, in the
// order `position` counts) and what listQuery makes, or, when `split` has
// parts for the query, their union (SplitList) in the list's order.
export function listStatement<C extends Column, Row>(
  table: ListedTable<C>,
  extra: (ExtraCondition<C> | LiteralFilter)[],
  placeholder: (n: number) => string,
  select: string,
  tenantId: string,
  query: ListQuery<Row>,
  split?: SplitList<Row>,
): { text: string; params: unknown[] } {
  const parts = split?.parts(query);
  if (!parts) {
    const { text, params } = listQuery(table, extra, placeholder, tenantId, query);
    return { text: `${select} ${text}`, params };
  }
  const params: unknown[] = [];
  const arms = parts.map((part, i) => {
    const offset = params.length;
    const arm = listQuery(table, extra, (n) => placeholder(offset + n), tenantId, part.query, part.condition);
    params.push(...arm.params);
    return `select * from (${select} ${arm.text}) as part${i}`;
  });
  const id = table.position(table.id);
  const by = query.after?.by === undefined ? undefined : table.column(query.after.by);
  const order = by ? `${table.position(by)}, ${id}` : query.after ? `${id}` : `${id} desc`;
  params.push(query.limit);
  return { text: `${arms.join(" union all ")} order by ${order} limit ${placeholder(params.length)}`, params };
}
