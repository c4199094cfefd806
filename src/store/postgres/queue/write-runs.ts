import { groupCommit } from "../../group-commit.js";
import type { RunRow } from "../../rows.js";
import type { RunOutcome } from "../../store.js";
import type { Sql } from "../open.js";
import { PLANNED_EACH_TIME } from "./planned-each-time.js";
import { RUNNING } from "./held-run.js";
import type postgres from "postgres";

type Tx = postgres.TransactionSql;

const MAX_WRITE_BATCH = 256;

// A step record, or a finish when it has an outcome. Serialized when the
// worker asks (it may go on changing its arrays), as one element of the
// batch's JSON array.
export interface StateWrite {
  id: string;
  finish: boolean;
  json: string;
}

export const stateWrite = (
  json: (value: unknown) => string,
  id: string,
  owner: string,
  now: number,
  steps: RunRow["steps"],
  outcome?: { status: RunOutcome["status"]; output: unknown; error: string },
): StateWrite => ({
  id,
  finish: outcome !== undefined,
  json: json({ id, owner, now, steps, status: outcome?.status ?? null, output: outcome?.output ?? null, error: outcome?.error ?? null }),
});

// Step records and finishes of runs the writer holds (lease_owner), many in
// one statement: a step record replaces the steps, a finish also ends the
// run and drops its lease. update_time moves forward on every write, even
// within one millisecond: watchers of a run notice its changes by it. The
// runs are also named by `id = any($3)`, a condition on the primary key
// itself: joined by `r.id = v.id` alone, a plan made on a nearly empty table
// read every run for each batch (a walk of the key, the batch matched
// against it), since the planner could not tell the batch was smaller.
const WRITE = `
  update runs r set
    status = coalesce(v.status, r.status),
    steps = v.steps,
    output = case when v.status is null then r.output else v.output end,
    error = coalesce(v.error, r.error),
    end_time = case when v.status is null then r.end_time else v.now end,
    lease_owner = case when v.status is null then r.lease_owner end,
    lease_expire_time = case when v.status is null then r.lease_expire_time end,
    update_time = greatest(r.update_time + 1, v.now)
  from jsonb_to_recordset($1::text::jsonb) as v(id text, owner text, now bigint, steps jsonb, status text, output jsonb, error text)
  where r.id = any($3::text[]) and r.id = v.id and r.lease_owner = v.owner and r.status = $2
  returning r.id`;

// Writes a batch; true for each write whose run the writer still held. One
// statement per round: a run appears at most once in a statement (the second
// update of a row in one statement would be lost), so a run's second write
// of a batch goes to the next round, in order.
export async function writeRuns(sql: Sql, writes: StateWrite[]): Promise<boolean[]> {
  const rounds: { write: StateWrite; at: number }[][] = [];
  const seen = new Map<string, number>();
  writes.forEach((write, at) => {
    const round = seen.get(write.id) ?? 0;
    seen.set(write.id, round + 1);
    (rounds[round] ??= []).push({ write, at });
  });
  const results = writes.map(() => false);
  const apply = async (q: Sql | Tx, round: { write: StateWrite; at: number }[]) => {
    const done = await q.unsafe<{ id: string }[]>(WRITE, [`[${round.map(({ write }) => write.json).join(",")}]`, RUNNING, round.map(({ write }) => write.id)], PLANNED_EACH_TIME);
    const ids = new Set(done.map((d) => d.id));
    for (const { write, at } of round) results[at] = ids.has(write.id);
  };
  // Step records are progress, not a promise: a batch of them only does not
  // wait for the disk (the finish that follows writes every step again, and
  // its commit flushes theirs). A batch with a finish does.
  const progressOnly = !writes.some((w) => w.finish);
  if (rounds.length === 1 && !progressOnly) await apply(sql, rounds[0]!);
  else
    await sql.begin(async (tx) => {
      if (progressOnly) await tx`set local synchronous_commit = off`;
      for (const round of rounds) await apply(tx, round);
    });
  return results;
}

// The writes of one event-loop turn (a batch of finishes that ended
// together, their step records) in one commit (see ../../group-commit.ts).
export const groupedWrites = (sql: Sql) => groupCommit<StateWrite, boolean>((writes) => writeRuns(sql, writes), MAX_WRITE_BATCH);
