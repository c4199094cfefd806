import type { TransactionSql } from "postgres";
import type { Sql } from "./open.js";
import { CHANNELS } from "./channels.js";
import type { RunInsert } from "../rows.js";

// Most parameters one statement may carry (the protocol's limit is 65,535).
const MAX_PARAMETERS = 60_000;

export const RUN_COLUMNS = [
  "id",
  "tenant_id",
  "agent_id",
  "trigger_id",
  "event_id",
  "input",
  "status",
  "attempt",
  "steps",
  "error",
  "create_time",
  "update_time",
] as const;

type RunValues = Record<(typeof RUN_COLUMNS)[number], string | number | null>;

// A queued run as a row of the multi-row insert; jsonb as JSON text, which
// the driver passes through.
export function runValues(r: RunInsert): RunValues {
  return {
    id: r.id,
    tenant_id: r.tenantId,
    agent_id: r.agentId,
    trigger_id: r.triggerId ?? null,
    event_id: r.eventId ?? null,
    input: r.input === undefined || r.input === null ? null : JSON.stringify(r.input),
    status: "queued",
    attempt: 0,
    steps: "[]",
    error: "",
    create_time: r.createTime,
    update_time: r.updateTime,
  };
}

// Queues runs with multi-row inserts inside the caller's transaction, and
// wakes the workers of every replica when it commits.
export async function queueRuns(tx: TransactionSql, runs: RunInsert[]): Promise<void> {
  if (!runs.length) return;
  const chunk = Math.floor(MAX_PARAMETERS / RUN_COLUMNS.length);
  for (let i = 0; i < runs.length; i += chunk)
    await tx`insert into runs ${tx(runs.slice(i, i + chunk).map(runValues), ...RUN_COLUMNS)}`;
  await tx`select pg_notify(${CHANNELS.runsQueued}, '')`;
}

export async function queuedCount(tx: Sql | TransactionSql, tenantId: string): Promise<number> {
  const [row] = await tx<[{ n: number }]>`select count(*)::int as n from runs where status = 'queued' and tenant_id = ${tenantId}`;
  return row.n;
}
