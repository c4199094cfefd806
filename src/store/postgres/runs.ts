import type { TransactionSql } from "postgres";
import type { Sql } from "./open.js";
import type { RunInsert } from "../rows.js";
import type { QueueStats } from "../store.js";
import { idTime } from "../../lib/ids.js";

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

export async function queuedCount(tx: Sql | TransactionSql, tenantId: string): Promise<number> {
  const [row] = await tx<[{ n: number }]>`select count(*)::int as n from runs where status = 'queued' and tenant_id = ${tenantId}`;
  return row.n;
}

// The oldest id stands for the oldest create time: a run's id is made when
// it is created (UUIDv7), and so the index of queued runs answers alone.
export async function queueStats(sql: Sql): Promise<QueueStats[]> {
  const rows = await sql<{ tenantId: string; queued: number; oldestId: string }[]>`
    select tenant_id as "tenantId", count(*)::int as queued, min(id) as "oldestId" from runs where status = 'queued' group by tenant_id`;
  return rows.map((r) => ({ tenantId: r.tenantId, queued: r.queued, oldestCreateTime: idTime(r.oldestId) }));
}
