import type postgres from "postgres";
import { fairPick, pickAsync, WORKER_LOST_ERROR, type QueuedCandidate, type RunningCount } from "../../claim.js";
import type { ClaimedRun } from "../../store.js";
import type { Sql } from "../open.js";
import { toClaimed, type PgClaimed } from "./run-row.js";
import { statement } from "./statement.js";

type Tx = postgres.TransactionSql;

// A claim picks from twice the runs it takes: the ones a concurrent claimer
// holds locked are skipped for the next in line rather than left untaken.
const OVERFETCH = 2;

// Key class of transaction-level advisory locks (pg_advisory_xact_lock(class,
// hashtext(id))): a capped agent's running count and the claims it admits.
const AGENT_CLAIM_LOCK = 0x5155_0002;

export interface ClaimParams {
  owner: string;
  limit: number;
  leaseMs: number;
  maxAttempts: number;
  now: number;
  // Runs this owner still executes (see RunQueue.claim).
  executing: string[];
}

interface Bound {
  now: number;
  maxAttempts: number;
  owner: string;
  executing: string[];
  limit: number;
  want: number;
  until: number;
  error: string;
  picked?: string[];
}

const bind = (p: ClaimParams): Bound => ({
  now: p.now,
  maxAttempts: p.maxAttempts,
  owner: p.owner,
  executing: p.executing,
  limit: p.limit,
  want: p.limit * OVERFETCH,
  until: p.now + p.leaseMs,
  error: WORKER_LOST_ERROR,
});

// A run of alias `r` whose lease expired on an attempt before its last. An
// expired lease of a run this owner still executes means its heartbeat fell
// behind: not claimable by the same owner. Any other expired run of its own
// (its outcome was never recorded) is, like a dead worker's.
const expiredRun = (r: string) => `${r}.status = 'running' and ${r}.lease_expire_time <= :now and ${r}.attempt < :maxAttempts
  and (${r}.lease_owner is distinct from :owner or not ${r}.id = any(:executing::text[]))`;

// Fails the runs whose lease expired on their last attempt.
const EXHAUST = `update runs set status = 'failed', error = :error, end_time = :now, lease_owner = null, lease_expire_time = null, update_time = :now
  where id in (select id from runs where status = 'running' and lease_expire_time <= :now and attempt >= :maxAttempts for update skip locked)`;

// Takes at most `limit` of the runs the CTE `pick` (id, ord) lists, best
// first, skipping those another claimer holds locked and re-checking each
// against its current row. By primary key: no plan walks the backlog.
const TAKEN = `
  taken as (
    update runs set status = 'running', lease_owner = :owner, lease_expire_time = :until, attempt = runs.attempt + 1,
      start_time = coalesce(runs.start_time, :now), update_time = :now
    from (
      select r.id from pick p join runs r on r.id = p.id
      where r.status = 'queued' or (${expiredRun("r")})
      order by p.ord limit :limit
      for update of r skip locked
    ) picked
    where runs.id = picked.id
    returning runs.*
  )`;

// The runs `taken` as one JSON array, each with its claim context
// (ClaimContext): the agent's update time and the event, each by primary key.
const TAKEN_JSON = `
  select coalesce(json_agg(to_jsonb(t) || jsonb_build_object('agent_update_time', a.update_time, 'event',
    case when e.id is null then null else jsonb_build_object('id', e.id, 'event_type', e.event_type, 'payload', e.payload,
      'source_id', e.source_id, 'receive_time', e.receive_time) end)), '[]')
  from taken t left join agents a on a.id = t.agent_id left join events e on e.id = t.event_id`;

// The tenants with queued runs, one index seek each (a loose index scan over
// runs_queued (tenant_id, id where queued)).
const TENANTS = `
  t as (
    (select tenant_id from runs where status = 'queued' order by tenant_id limit 1)
    union all
    select (select r.tenant_id from runs r where r.status = 'queued' and r.tenant_id > t.tenant_id order by r.tenant_id limit 1)
    from t where t.tenant_id is not null
  )`;

// Each tenant's `want` oldest queued runs of agents not in `excluded`, from
// the tenant's first queued run on in runs_queued's order (the next tenant's
// runs are dropped by the caller's "q.tenant_id = t.tenant_id"). Not
// "tenant_id = … order by id": the primary key has that order too, and a
// planner that believes most runs queued walks it over the runs that ended.
const oldestQueued = (excluded: string) => `
  select id, tenant_id, agent_id from runs
  where status = 'queued' and (tenant_id, id) > (t.tenant_id, '') and agent_id <> all(${excluded})
  order by tenant_id, id limit :want`;

// The common claim in one statement, so one round trip: the runs whose last
// attempt expired are failed, expired leases are taken first (they started
// long ago, and taking one over changes no count of running runs), then
// queued runs in the fair order of ../../claim.ts, ranked here in SQL: a
// tenant's k-th oldest queued run ranks running(tenant) + k, the lowest
// ranks first. The backlog is never read: one index seek per tenant with
// queued runs, and a range of `want` runs each. Agents at their
// max_concurrent_runs are left out.
//
// A capped agent with room needs its running runs counted after a lock (see
// claimLocked): when a run this statement would take is one of such an
// agent's, it takes nothing and answers ok = false, and the claim goes the
// long way.
//
// The commit does not wait for the disk (synchronous_commit off, for this
// transaction only): a claim that a crash of the database loses only delays
// its runs until their leases expire; the finish, which waits, makes it
// durable with it.
const CLAIM = statement<Bound>(`
  with recursive
  exhausted as (${EXHAUST} returning 1),
  running as (
    select tenant_id, agent_id, count(*) as n from runs
    where status = 'running' and not (lease_expire_time <= :now and attempt >= :maxAttempts)
    group by tenant_id, agent_id
  ),
  busy as (select tenant_id, sum(n) as n from running group by tenant_id),
  full_agents as (
    select r.agent_id from running r join agents a on a.id = r.agent_id
    where a.max_concurrent_runs > 0 and r.n >= a.max_concurrent_runs
  ),
  ${TENANTS},
  candidates as (
    select q.id, q.tenant_id, q.agent_id, row_number() over (partition by q.tenant_id order by q.id) as k
    from t cross join lateral (${oldestQueued("array(select agent_id from full_agents)")}) q
    where q.tenant_id = t.tenant_id
  ),
  best as (
    select id, capped, row_number() over (order by first, rank, id) as ord from (
      select r.id, false as capped, 0 as first, 0::numeric as rank from runs r where ${expiredRun("r")}
      union all
      select c.id, a.id is not null, 1, coalesce(b.n, 0) + c.k
      from candidates c
      left join busy b on b.tenant_id = c.tenant_id
      left join agents a on a.id = c.agent_id and a.max_concurrent_runs > 0
    ) ranked
    order by first, rank, id limit :want
  ),
  go as (select not exists (select from best where capped) as ok, set_config('synchronous_commit', 'off', true) as async),
  pick as (select best.id, best.ord from best, go where go.ok),
  ${TAKEN}
  select go.ok, (${TAKEN_JSON}) as runs, (select count(*) from exhausted) as exhausted from go`);

// The long way, when capped agents with room are among the best runs: one
// transaction in which ../../claim.ts picks from the candidates and counts,
// the capped agents' advisory locks are taken (in one order in every
// claimer: no deadlock), their running runs counted by a statement after the
// locks (it sees what the claimers before committed), and the picks taken.
// So max_concurrent_runs holds across replicas.
const EXPIRED = statement<Bound>(`select r.id from runs r where ${expiredRun("r")} order by r.id limit :want`);
const EXHAUSTED = statement<Bound>(EXHAUST);
const RUNNING = `
  select r.tenant_id as "tenantId", r.agent_id as "agentId", max(a.max_concurrent_runs) as cap, count(*)::int as n
  from runs r left join agents a on a.id = r.agent_id and a.max_concurrent_runs > 0
  where r.status = 'running' group by r.tenant_id, r.agent_id`;
const CANDIDATES = statement<{ excluded: string[]; want: number }>(`
  with recursive ${TENANTS}
  select q.id, q.tenant_id as "tenantId", q.agent_id as "agentId", a.max_concurrent_runs as cap
  from t cross join lateral (${oldestQueued(":excluded::text[]")}) q
  left join agents a on a.id = q.agent_id and a.max_concurrent_runs > 0
  where q.tenant_id = t.tenant_id`);
const ROOMS = `
  select a.id, coalesce(a.max_concurrent_runs, 0) - (select count(*) from runs r where r.status = 'running' and r.agent_id = a.id)::int as room
  from agents a where a.id = any($1::text[]) and a.max_concurrent_runs > 0`;
const TAKE = statement<Bound>(`
  with pick as (select id, ord from unnest(:picked::text[]) with ordinality as p(id, ord)),
  ${TAKEN}
  select (${TAKEN_JSON}) as runs`);

async function claimLocked(tx: Tx, b: Bound): Promise<ClaimedRun[]> {
  await tx`set local synchronous_commit = off`;
  const [, expired, running] = await Promise.all([
    tx.unsafe(EXHAUSTED.text, EXHAUSTED.params(b), { prepare: true }),
    tx.unsafe<{ id: string }[]>(EXPIRED.text, EXPIRED.params(b), { prepare: true }),
    tx.unsafe<RunningCount[]>(RUNNING, [], { prepare: true }),
  ]);
  const n = b.want - expired.length;
  let picked: QueuedCandidate[] = [];
  if (n > 0) {
    const fetch = (excluded: string[]) => tx.unsafe<QueuedCandidate[]>(CANDIDATES.text, CANDIDATES.params({ excluded, want: n }), { prepare: true });
    picked = await withinCaps(tx, await pickAsync(fairPick(running, n, n), fetch));
  }
  const ids = [...expired.map((r) => r.id), ...picked.map((c) => c.id)];
  if (!ids.length) return [];
  const [taken] = await tx.unsafe<{ runs: PgClaimed[] }[]>(TAKE.text, TAKE.params({ ...b, picked: ids }), { prepare: true });
  return taken!.runs.map(toClaimed);
}

// Keeps of the picked runs of capped agents only what each agent has room
// for once no other claimer can add to its running runs.
async function withinCaps(tx: Tx, picked: QueuedCandidate[]): Promise<QueuedCandidate[]> {
  const agents = [...new Set(picked.filter((c) => c.cap !== null).map((c) => c.agentId))];
  if (!agents.length) return picked;
  await tx`
    select pg_advisory_xact_lock(${AGENT_CLAIM_LOCK}, k)
    from (select distinct hashtext(a) as k from unnest(${agents}::text[]) a order by k) keys`;
  const rooms = await tx.unsafe<{ id: string; room: number }[]>(ROOMS, [agents], { prepare: true });
  const room = new Map(rooms.map((r) => [r.id, r.room]));
  return picked.filter((c) => {
    if (c.cap === null) return true;
    const left = room.get(c.agentId) ?? Infinity;
    room.set(c.agentId, left - 1);
    return left > 0;
  });
}

// Leases up to `limit` runs: the RunQueue contract's claim.
export async function claimRuns(sql: Sql, p: ClaimParams): Promise<ClaimedRun[]> {
  const b = bind(p);
  const [answer] = await sql.unsafe<{ ok: boolean; runs: PgClaimed[] }[]>(CLAIM.text, CLAIM.params(b), { prepare: true });
  if (answer!.ok) return answer!.runs.map(toClaimed);
  return sql.begin((tx) => claimLocked(tx, b));
}
