import type postgres from "postgres";
import { writingJson } from "../errors.js";
import { groupCommit } from "../group-commit.js";
import type { RunRow } from "../rows.js";
import type { SignalHub } from "../signal-hub.js";
import type { RunOutcome, RunQueue } from "../store.js";
import type { ChangeNotifier } from "./change-notifier.js";
import { CHANNELS } from "./channels.js";
import { toStoreError } from "./errors.js";
import { claimRuns } from "./queue/claim-runs.js";
import { toRow, type PgRun } from "./queue/run-row.js";
import { lockTenantScope } from "./locks.js";
import { queuedCount, queueRuns } from "./runs.js";
import type { Sql } from "./open.js";

type Tx = postgres.TransactionSql;

const MAX_WRITE_BATCH = 256;

const mapped = <T>(p: Promise<T>): Promise<T> =>
  p.catch((err: unknown) => {
    throw toStoreError(err);
  });

// A step record, or a finish when it has a status. Serialized when the
// worker asks (it may go on changing its arrays), as one element of the
// batch's JSON array.
interface StateWrite {
  id: string;
  finish: boolean;
  json: string;
}

const stateWrite = (
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


// The run queue on PostgreSQL, shared by every replica. A claim is one
// transaction: it reads the candidates without locks (../claim.ts picks
// them, fair between tenants), then locks and takes the picked runs in one
// statement with FOR UPDATE SKIP LOCKED, re-checking that each is still
// claimable; a run another claimer holds is skipped, never waited for, and
// never taken twice. Claims of a capped agent's runs serialize on that
// agent's advisory lock and count its running runs after taking it, so
// max_concurrent_runs holds across replicas. Everything a worker writes
// while it runs a run is conditional on its lease_owner.
//
// Other replicas learn of new claimable runs (insertMany, release) and
// cancellations through NOTIFY, sent at commit; the cancellation is also
// signalled in this process at once, not after the round trip through
// LISTEN (aborting twice is harmless). Queued runs are not signalled here:
// the service wakes this process's workers itself, and a second wake-up
// would cost a claim. Every write of runs tells the streams after its
// commit (ChangeNotifier), with the tenants it touched.
export function createPgRunQueue(sql: Sql, signals: SignalHub, changes: ChangeNotifier): RunQueue {
  // One statement per round: a run appears at most once in a statement (the
  // second update of a row in one statement would be lost), so a run's
  // second write of a batch goes to the next round, in order.
  async function commitWrites(writes: StateWrite[]): Promise<boolean[]> {
    const rounds: { write: StateWrite; at: number }[][] = [];
    const seen = new Map<string, number>();
    writes.forEach((write, at) => {
      const round = seen.get(write.id) ?? 0;
      seen.set(write.id, round + 1);
      (rounds[round] ??= []).push({ write, at });
    });
    const results = writes.map(() => false);
    const tenants = new Set<string>();
    const apply = async (q: Sql | Tx, round: { write: StateWrite; at: number }[]) => {
      const values = `[${round.map(({ write }) => write.json).join(",")}]`;
      const done = await q<{ id: string; tenant_id: string }[]>`
        update runs r set
          status = coalesce(v.status, r.status),
          steps = v.steps,
          output = case when v.status is null then r.output else v.output end,
          error = coalesce(v.error, r.error),
          end_time = case when v.status is null then r.end_time else v.now end,
          lease_owner = case when v.status is null then r.lease_owner end,
          lease_expire_time = case when v.status is null then r.lease_expire_time end,
          -- Forward on every write, even within one millisecond: watchers of a run notice its changes by it.
          update_time = greatest(r.update_time + 1, v.now)
        from jsonb_to_recordset(${values}::text::jsonb) as v(id text, owner text, now bigint, steps jsonb, status text, output jsonb, error text)
        where r.id = v.id and r.lease_owner = v.owner and r.status = 'running'
        returning r.id, r.tenant_id`;
      const ids = new Set(done.map((d) => d.id));
      for (const d of done) tenants.add(d.tenant_id);
      for (const { write, at } of round) results[at] = ids.has(write.id);
    };
    // Step records are progress, not a promise: a batch of them only does not
    // wait for the disk (the finish that follows writes every step again,
    // and its commit flushes theirs). A batch with a finish does.
    const progressOnly = !writes.some((w) => w.finish);
    if (rounds.length === 1 && !progressOnly) await apply(sql, rounds[0]!);
    else
      await sql.begin(async (tx) => {
        if (progressOnly) await tx`set local synchronous_commit = off`;
        for (const round of rounds) await apply(tx, round);
      });
    for (const tenantId of tenants) changes.runsChanged(tenantId);
    return results;
  }
  const write = groupCommit<StateWrite, boolean>((writes) => mapped(commitWrites(writes)), MAX_WRITE_BATCH);

  return {
    claim: (owner, limit, leaseMs, maxAttempts, now, executing) =>
      mapped(
        claimRuns(sql, { owner, limit, leaseMs, maxAttempts, now, executing }).then((rows) => {
          for (const tenantId of new Set(rows.map((r) => r.tenantId))) changes.runsChanged(tenantId);
          return rows;
        }),
      ),
    // Lease bookkeeping, not a change of the run: update_time stays, and the
    // runs trigger wakes no stream.
    heartbeat: (owner, ids, leaseMs, now) =>
      mapped(
        (async () =>
          new Set(
            (
              await sql<{ id: string }[]>`
                update runs set lease_expire_time = ${now + leaseMs}
                where id = any(${ids}::text[]) and lease_owner = ${owner} and status = 'running'
                returning id`
            ).map((r) => r.id),
          ))(),
      ),
    recordSteps: (owner, id, steps, now) => writingJson((json) => write(stateWrite(json, id, owner, now, steps))),
    finish: (owner, id, o, now) => writingJson((json) => write(stateWrite(json, id, owner, now, o.steps, { status: o.status, output: o.output, error: o.error }))),
    release: (owner, ids, now) =>
      mapped(
        (async () => {
          await sql`
            with released as (
              update runs set status = 'queued', lease_owner = null, lease_expire_time = null, attempt = greatest(attempt - 1, 0),
                start_time = null, update_time = ${now}
              where id = any(${ids}::text[]) and lease_owner = ${owner} and status = 'running'
              returning id
            )
            select pg_notify(${CHANNELS.runsQueued}, '') from released`;
          changes.runsChanged(undefined);
        })(),
      ),
    // Conditional: a run that finished meanwhile is not turned into cancelled.
    cancel: (tenantId, id, now) =>
      mapped(
        (async () => {
          const [row] = await sql<PgRun[]>`
            with cancelled as (
              update runs set status = 'cancelled', end_time = ${now}, lease_owner = null, lease_expire_time = null, update_time = ${now}
              where tenant_id = ${tenantId} and id = ${id} and status in ('queued', 'running')
              returning *
            )
            select cancelled.*, pg_notify(${CHANNELS.runCancelled}, cancelled.id) from cancelled`;
          if (!row) return undefined;
          signals.runCancelled(row.id);
          changes.runsChanged(tenantId);
          return toRow(row);
        })(),
      ),
    nextLeaseExpiry: () =>
      mapped(
        (async () => {
          const [row] = await sql<{ t: number | null }[]>`select min(lease_expire_time) as t from runs where status = 'running'`;
          return row?.t ?? undefined;
        })(),
      ),
    insertMany: (rows, maxQueued = Infinity) =>
      mapped(
        sql.begin(async (tx) => {
          if (!rows.length) return true;
          if (maxQueued !== Infinity) {
            const tenantId = rows[0]!.tenantId;
            // The lock schedules take too: one count-then-insert per tenant at a time.
            await lockTenantScope(tx, "queued_runs", tenantId);
            if ((await queuedCount(tx, tenantId)) + rows.length > maxQueued) return false;
          }
          await queueRuns(tx, rows);
          return true;
        }).then((ok) => {
          if (ok && rows.length) changes.runsChanged(rows[0]!.tenantId);
          return ok;
        }),
      ),
  };
}
