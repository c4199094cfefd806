import type { TransactionSql } from "postgres";
import type { Sql } from "./open.js";
import type { RunInsert } from "../rows.js";
import type { QueueStats } from "../store.js";
import { idTime } from "../../lib/ids.js";
import { byEvent } from "../runs-by-event.js";

// Multi-row inserts take their rows as one JSON array expanded by
// json_to_recordset: one prepared statement serves any number of rows, and
// no row count meets the protocol's 65,535-parameter limit.
const RUN_RECORD = `id text, tenant_id text, agent_id text, trigger_id text, event_id text, input jsonb, status text,
  attempt integer, steps jsonb, error text, trace_parent text, create_time bigint, update_time bigint`;
const RUN_COLUMNS = RUN_RECORD.split(",").map((c) => c.trim().split(" ")[0]).join(", ");

// Inserts, as queued runs, the records of the JSON array parameter `param`
// that pass `where` (a condition on `r`).
export const insertRunRecords = (param: string, where = "true") =>
  `insert into runs (${RUN_COLUMNS}) select * from json_to_recordset(${param}::json) as r(${RUN_RECORD}) where ${where}`;

// A queued run as a record of that array.
export const runRecord = (r: RunInsert) => ({
  id: r.id,
  tenant_id: r.tenantId,
  agent_id: r.agentId,
  trigger_id: r.triggerId ?? null,
  event_id: r.eventId ?? null,
  input: r.input ?? null,
  status: "queued",
  attempt: 0,
  steps: [],
  error: "",
  trace_parent: r.traceParent ?? null,
  create_time: r.createTime,
  update_time: r.updateTime,
});

const QUEUE_RUNS = insertRunRecords("$1");

// Queues runs inside the caller's transaction (the store's signalled wrapper
// wakes the workers once it committed).
export async function queueRuns(tx: TransactionSql, runs: RunInsert[]): Promise<void> {
  if (runs.length) await tx.unsafe(QUEUE_RUNS, [JSON.stringify(runs.map(runRecord))], { prepare: true });
}

// Queued runs from rows `q` of queued_run_counts: the two running totals,
// in − out, one row read each however deep the backlog, where counting the
// runs would read every queued one.
const QUEUED = "sum(case q.side when 'in' then q.n else -q.n end)";

export const QUEUED_COUNT = `select coalesce((select ${QUEUED} from queued_run_counts q where q.tenant_id = $1), 0)::int as n`;

// CTEs `held` and `counted`: holds the `in` rows of the tenants in the text
// array `tenants` (created if missing), in tenant order, and counts each
// tenant's queued runs. Holding them is the lock every writer of a tenant's
// queued runs takes before it checks the tenant's cap (ingestion, RunAgent,
// schedule slots), on every replica, and the runs trigger's own upsert of
// them comes later in the same transaction. An upsert that meets an existing
// row takes its latest version, whatever the statement's snapshot (read
// committed), so `in` is exact; `out` is the snapshot's, which a claim
// committing meanwhile can only leave smaller: a count errs towards
// refusing, never past the cap.
export const holdCounts = (tenants: string) => `
  held as (
    insert into queued_run_counts (tenant_id, side, n) select distinct t, 'in', 0 from unnest(${tenants}::text[]) t order by 1
    on conflict (tenant_id, side) do update set n = queued_run_counts.n
    returning tenant_id, n),
  counted as (
    select h.tenant_id, (h.n - coalesce((select o.n from queued_run_counts o where o.tenant_id = h.tenant_id and o.side = 'out'), 0))::int as n
    from held h)`;

const HOLD_COUNTS = `with ${holdCounts("$1")} select tenant_id as "tenantId", n from counted`;

// Holds the counts of these tenants (holdCounts) until the transaction ends;
// each one's queued runs.
export async function holdQueuedCounts(tx: TransactionSql, tenantIds: string[]): Promise<Map<string, number>> {
  if (!tenantIds.length) return new Map();
  const rows = await tx.unsafe<{ tenantId: string; n: number }[]>(HOLD_COUNTS, [tenantIds], { prepare: true });
  return new Map(rows.map((r) => [r.tenantId, r.n]));
}

export async function queuedCount(tx: Sql | TransactionSql, tenantId: string): Promise<number> {
  const [row] = await tx.unsafe<[{ n: number }]>(QUEUED_COUNT, [tenantId], { prepare: true });
  return row.n;
}

// Per tenant with queued runs: the count from queued_run_counts, and the
// oldest id (one seek into runs_queued), which stands for the oldest create
// time: a run's id is made when it is created (UUIDv7).
const QUEUE_STATS = `
  select c.tenant_id as "tenantId", c.n::int as queued,
    (select min(r.id) from runs r where r.status = 'queued' and r.tenant_id = c.tenant_id) as "oldestId"
  from (select q.tenant_id, ${QUEUED} as n from queued_run_counts q group by q.tenant_id) c
  where c.n > 0`;

export async function queueStats(sql: Sql): Promise<QueueStats[]> {
  const rows = await sql.unsafe<{ tenantId: string; queued: number; oldestId: string }[]>(QUEUE_STATS, [], { prepare: true });
  return rows.map((r) => ({ tenantId: r.tenantId, queued: r.queued, oldestCreateTime: idTime(r.oldestId) }));
}

// The runs of an event, and of each of a page of events, newest first. Each
// planned for its values at every call (the main pool's plan cache mode,
// ./open.ts): the seek is runs_event (event, tenant), and a plan made
// without the values, or on the nearly empty table a new deployment starts
// with, ties it with the tenant's prefix of runs_agent and walks every run
// of the tenant (test/queue-cost.test.ts).
const BY_EVENT = `select id, event_id as "eventId" from runs where tenant_id = $1 and event_id = any($2::text[]) order by id desc`;

export const runIdsForEvent = async (sql: Sql, tenantId: string, eventId: string): Promise<string[]> =>
  (await sql.unsafe<{ id: string }[]>(BY_EVENT, [tenantId, [eventId]], { prepare: true })).map((r) => r.id);

export const runIdsForEvents = async (sql: Sql, tenantId: string, eventIds: string[]): Promise<Map<string, string[]>> =>
  byEvent(eventIds.length ? await sql.unsafe<{ id: string; eventId: string }[]>(BY_EVENT, [tenantId, eventIds], { prepare: true }) : []);
