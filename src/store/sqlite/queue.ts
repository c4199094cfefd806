import type Database from "better-sqlite3";
import type { RunRow } from "../rows.js";
import { fairPick, pickSync, WORKER_LOST_ERROR, type QueuedCandidate, type RunningCount } from "../claim.js";
import { groupCommit } from "../group-commit.js";
import { run } from "./errors.js";
import { writingJson } from "../errors.js";
import type { QueueStats, RunOutcome, RunQueue } from "../store.js";
import { idTime } from "../../lib/ids.js";

interface RawRun extends Omit<RunRow, "input" | "steps" | "output"> {
  input: string | null;
  steps: string;
  output: string | null;
}

// Column names as the Drizzle row shape uses them.
const SELECT = `id, tenant_id as tenantId, agent_id as agentId, trigger_id as triggerId, event_id as eventId,
  input, status, attempt, steps, output, error, start_time as startTime, end_time as endTime,
  lease_owner as leaseOwner, lease_expire_time as leaseExpireTime, trace_parent as traceParent, create_time as createTime, update_time as updateTime`;

const parse = (r: RawRun): RunRow => ({
  ...r,
  input: r.input === null ? null : (JSON.parse(r.input) as unknown),
  steps: JSON.parse(r.steps) as RunRow["steps"],
  output: r.output === null ? null : (JSON.parse(r.output) as unknown),
});

// Writes of run state grouped into one commit (see ../group-commit.ts).
const MAX_WRITE_BATCH = 256;

type StateWrite =
  | { kind: "steps"; owner: string; id: string; steps: string; now: number }
  | { kind: "finish"; owner: string; id: string; status: string; steps: string; output: string | null; error: string; now: number };

// The run queue on SQLite. SQLite has one writer at a time: each claim is an
// immediate transaction that sees and takes runs alone, across processes on
// the file too, so the counts behind fairness and max_concurrent_runs hold
// without further locking. What a claim picks: ../claim.ts.
export function createSqliteRunQueue(raw: Database.Database): RunQueue {
  const exhaust = raw.prepare(
    `update runs set status = 'failed', error = @error, end_time = @now,
       lease_owner = null, lease_expire_time = null, update_time = @now
     where status = 'running' and lease_expire_time <= @now and attempt >= @maxAttempts`,
  );
  // An expired lease of a run this owner still executes means its heartbeat
  // fell behind: not claimable by the same owner. Any other expired run of
  // its own (its outcome was never recorded) is, like a dead worker's. They
  // go first: they started long ago, and taking one over changes no count of
  // running runs. runs_leases is named: without statistics SQLite walks the
  // primary key for "order by id limit" and reads every run to find the
  // running ones (1,250 pages per claim at 50,000 queued).
  const expired = raw
    .prepare<{ now: number; limit: number; owner: string; executing: string }, string>(
      `select id from runs indexed by runs_leases where status = 'running' and lease_expire_time <= @now
         and (lease_owner is not @owner or id not in (select value from json_each(@executing)))
       order by id limit @limit`,
    )
    .pluck(true);
  // runs_leases is named here too: without statistics SQLite takes an index
  // that orders the group by (runs_agent) and scans every run for the
  // running few.
  const running = raw.prepare<[], RunningCount>(
    `select r.tenant_id as tenantId, r.agent_id as agentId, case when a.max_concurrent_runs > 0 then a.max_concurrent_runs end as cap,
       count(*) as n
     from runs r indexed by runs_leases left join agents a on a.id = r.agent_id
     where r.status = 'running' group by r.tenant_id, r.agent_id`,
  );
  // Every tenant's `limit` oldest queued runs (of agents not excluded), in
  // one statement: the tenants with queued runs are walked one index seek
  // each (a loose index scan), and each tenant's runs are an index range up
  // to its limit-th run, so the backlog is never read. The runs_queued index
  // is named: without statistics SQLite prefers runs_leases for
  // "status = ?" and would sort every queued run per tenant; the cross join
  // keeps the tenants outside.
  const candidates = raw.prepare<{ excluded: string; limit: number }, QueuedCandidate>(
    `with recursive t(tenant_id) as (
       select (select tenant_id from runs indexed by runs_queued where status = 'queued' order by tenant_id limit 1)
       union all
       select (select r.tenant_id from runs r indexed by runs_queued where r.status = 'queued' and r.tenant_id > t.tenant_id
               order by r.tenant_id limit 1)
       from t where t.tenant_id is not null
     )
     select r.id, r.tenant_id as tenantId, r.agent_id as agentId, case when a.max_concurrent_runs > 0 then a.max_concurrent_runs end as cap
     from t cross join runs r indexed by runs_queued on r.status = 'queued' and r.tenant_id = t.tenant_id
       and r.id <= coalesce(
         (select x.id from runs x indexed by runs_queued
          where x.status = 'queued' and x.tenant_id = t.tenant_id and x.agent_id not in (select value from json_each(@excluded))
          order by x.id limit 1 offset @limit - 1),
         char(1114111)) -- fewer queued: all of them (U+10FFFF sorts after every id)
       and r.agent_id not in (select value from json_each(@excluded))
     left join agents a on a.id = r.agent_id
     where t.tenant_id is not null`,
  );
  const take = raw.prepare<{ id: string; owner: string; now: number; until: number }, RawRun>(
    `update runs set status = 'running', lease_owner = @owner, lease_expire_time = @until, attempt = attempt + 1,
       start_time = coalesce(start_time, @now), update_time = @now
     where id = @id returning ${SELECT}`,
  );
  const claimTx = raw.transaction((owner: string, limit: number, leaseMs: number, maxAttempts: number, now: number, executing: string[]) => {
    exhaust.run({ now, maxAttempts, error: WORKER_LOST_ERROR });
    const ids = expired.all({ now, limit, owner, executing: JSON.stringify(executing) });
    if (ids.length < limit) {
      const want = limit - ids.length;
      const pick = fairPick(running.all(), want, want);
      ids.push(...pickSync(pick, (excluded) => candidates.all({ excluded: JSON.stringify(excluded), limit: want })).map((c) => c.id));
    }
    return ids.map((id) => parse(take.get({ id, owner, now, until: now + leaseMs })!));
  });
  // Lease bookkeeping, not a change of the run: update_time stays (streams
  // watch it).
  const extend = raw.prepare<{ owner: string; id: string; until: number }>(
    `update runs set lease_expire_time = @until where id = @id and lease_owner = @owner and status = 'running'`,
  );
  const heartbeatTx = raw.transaction((owner: string, ids: string[], until: number) =>
    ids.filter((id) => extend.run({ owner, id, until }).changes > 0),
  );
  // update_time moves forward on every step record and finish, even within
  // one millisecond: watchers of a run notice its changes by it.
  const steps = raw.prepare<StateWrite & { kind: "steps" }>(
    `update runs set steps = @steps, update_time = max(update_time + 1, @now) where id = @id and lease_owner = @owner and status = 'running'`,
  );
  const finish = raw.prepare<StateWrite & { kind: "finish" }>(
    `update runs set status = @status, steps = @steps, output = @output, error = @error, end_time = @now,
       lease_owner = null, lease_expire_time = null, update_time = max(update_time + 1, @now)
     where id = @id and lease_owner = @owner and status = 'running'`,
  );
  const writeTx = raw.transaction((writes: StateWrite[]) =>
    writes.map((w) => (w.kind === "steps" ? steps.run(w) : finish.run(w)).changes > 0),
  );
  const write = groupCommit<StateWrite, boolean>(
    (writes) => run(() => (writes.some((w) => w.kind === "finish") ? writeTx.immediate(writes) : unsynced(() => writeTx.immediate(writes)))),
    MAX_WRITE_BATCH,
  );
  const release = raw.prepare<{ owner: string; id: string; now: number }>(
    `update runs set status = 'queued', lease_owner = null, lease_expire_time = null, attempt = max(attempt - 1, 0),
       start_time = null, update_time = @now
     where id = @id and lease_owner = @owner and status = 'running'`,
  );
  const releaseTx = raw.transaction((owner: string, ids: string[], now: number) => ids.forEach((id) => release.run({ owner, id, now })));
  // Conditional: a run that finished meanwhile is not turned into cancelled.
  const cancel = raw.prepare<{ tenantId: string; id: string; now: number }, RawRun>(
    `update runs set status = 'cancelled', end_time = @now, lease_owner = null, lease_expire_time = null, update_time = @now
     where tenant_id = @tenantId and id = @id and status in ('queued', 'running') returning ${SELECT}`,
  );
  const nextExpiry = raw.prepare<[], { t: number | null }>(`select min(lease_expire_time) as t from runs where status = 'running'`);
  const insert = prepareRunInsert(raw);
  const queued = prepareQueuedCount(raw);
  const insertTx = raw.transaction((rows: Parameters<RunQueue["insertMany"]>[0], maxQueued: number) => {
    if (rows.length && queued.get(rows[0]!.tenantId)! + rows.length > maxQueued) return false;
    for (const r of rows) insert.run(r);
    return true;
  });

  // Claims and step records are the queue's own bookkeeping, not a promise
  // to anyone: they commit without syncing the disk (WAL frames that a crash
  // of a process keeps and a power loss may not). A power loss also stops
  // every worker on this host, and a claim or step record it undoes means a
  // run executed again, at least once as ever. Finishes, cancellations and
  // queued runs (promised to an API caller) sync as configured, and each
  // synced commit makes every earlier one durable with it.
  const synchronous = raw.pragma("synchronous", { simple: true }) as number;
  function unsynced<T>(commit: () => T): T {
    raw.pragma("synchronous = NORMAL");
    try {
      return commit();
    } finally {
      raw.pragma(`synchronous = ${synchronous}`);
    }
  }

  return {
    claim: (owner, limit, leaseMs, maxAttempts, now, executing) =>
      run(() => unsynced(() => claimTx.immediate(owner, limit, leaseMs, maxAttempts, now, executing))),
    heartbeat: (owner, ids, leaseMs, now) => run(() => new Set(heartbeatTx(owner, ids, now + leaseMs))),
    // Serialized now: the caller may go on changing its array.
    recordSteps: (owner, id, s, now) => writingJson((json) => write({ kind: "steps", owner, id, steps: json(s), now })),
    finish: (owner, id, o: RunOutcome, now) =>
      writingJson((json) =>
        write({
          kind: "finish",
          owner,
          id,
          status: o.status,
          steps: json(o.steps),
          output: o.output === undefined ? null : json(o.output),
          error: o.error,
          now,
        }),
      ),
    release: (owner, ids, now) => run(() => releaseTx(owner, ids, now)),
    cancel: (tenantId, id, now) =>
      run(() => {
        const row = cancel.get({ tenantId, id, now });
        return row && parse(row);
      }),
    nextLeaseExpiry: () => run(() => nextExpiry.get()?.t ?? undefined),
    insertMany: (rows, maxQueued = Infinity) => run(() => insertTx.immediate(rows, maxQueued)),
  };
}

type RunInsert = Parameters<RunQueue["insertMany"]>[0][number];

// Queues one run; shared by ingestion, schedules and replays.
export function prepareRunInsert(raw: Database.Database): { run(r: RunInsert): void } {
  const stmt = raw.prepare(
    `insert into runs (id, tenant_id, agent_id, trigger_id, event_id, input, status, attempt, steps, error, trace_parent, create_time, update_time)
     values (@id, @tenantId, @agentId, @triggerId, @eventId, @input, 'queued', 0, '[]', '', @traceParent, @createTime, @updateTime)`,
  );
  return {
    run: (r) =>
      void stmt.run({
        ...r,
        triggerId: r.triggerId ?? null,
        eventId: r.eventId ?? null,
        traceParent: r.traceParent ?? null,
        input: r.input === undefined || r.input === null ? null : JSON.stringify(r.input),
      }),
  };
}

// Per tenant with queued runs: the count kept in queued_run_counts, and the
// oldest id (one seek into runs_queued), which stands for the oldest create
// time: a run's id is made when it is created (UUIDv7).
export function prepareQueueStats(raw: Database.Database) {
  const statement = raw.prepare<[], { tenantId: string; queued: number; oldestId: string }>(
    `select c.tenant_id as tenantId, c.n as queued,
       (select min(r.id) from runs r indexed by runs_queued where r.status = 'queued' and r.tenant_id = c.tenant_id) as oldestId
     from queued_run_counts c where c.n > 0`,
  );
  return () => statement.all().map((r): QueueStats => ({ tenantId: r.tenantId, queued: r.queued, oldestCreateTime: idTime(r.oldestId) }));
}

// How many runs of a tenant wait to be claimed: the count the triggers on
// runs keep in queued_run_counts, one row read however deep the backlog.
export const QUEUED_COUNT = `select coalesce((select n from queued_run_counts where tenant_id = ?), 0)`;

export function prepareQueuedCount(raw: Database.Database): Database.Statement<[string], number> {
  return raw.prepare<[string], number>(QUEUED_COUNT).pluck(true);
}
