// The tenant overview on PostgreSQL: one pass over the window's runs
// computes every grouping at once (GROUPING SETS, hashed), the window cut in
// SLICES read side by side on the pool; events and the queue alongside. Rows
// are found through an id range (ids are UUIDv7: they sort by creation time)
// of the tenant's index of each status (./overview-rows.ts), and sorting is switched off for
// the statement, so neither plan depends on statistics the tables may lack.
// The slots sealed already are read from their rollups instead
// (./overview-rollups.ts), the rest as ever.
import { idFloor, idTime } from "../../lib/ids.js";
import {
  FAILED_RUN,
  ID_MARGIN_MS,
  SLOT_MS,
  foldGroups,
  fromRollups,
  readWindow,
  type OverviewCounts,
  type OverviewQuery,
  type OverviewStore,
  type RollupRow,
  type RunGroup,
} from "../overview.js";
import type { RunStatus } from "../types.js";
import { within } from "./deadline.js";
import { pg } from "./errors.js";
import type { Sql } from "./open.js";
import { createPgRollups } from "./overview-rollups.js";
import { RUN_ROWS } from "./overview-rows.js";
import { QUEUED_COUNT } from "./runs.js";

// Concurrent slices of the window: the machine's cores share one overview.
const SLICES = 2;

// Every RunGroup set of RUN_ROWS (its parameters) in one pass.
const GROUPS = `
  select grouping(bucket, status, agent_id, trigger_id, word, d) as g, bucket, status, agent_id, trigger_id, word, d,
    count(*)::int as n, count(*) filter (where ${FAILED_RUN})::int as failures
  from (${RUN_ROWS}) r
  group by grouping sets ((bucket, status), (agent_id), (trigger_id), (status, word), (d))`;

interface GroupRow {
  g: number;
  bucket: number | null;
  status: RunStatus | null;
  agent_id: string | null;
  trigger_id: string | null;
  word: string | null;
  d: number | null;
  n: number;
  failures: number;
}

// grouping() sets a bit per column left out, the first column highest.
const ONLY = (...kept: number[]) => 0b111111 ^ kept.reduce((a, bit) => a | (1 << (5 - bit)), 0);
const SETS = { bucket: ONLY(0, 1), agent: ONLY(2), trigger: ONLY(3), word: ONLY(1, 4), duration: ONLY(5) };

function toGroup(r: GroupRow): RunGroup | undefined {
  switch (r.g) {
    case SETS.bucket:
      return { set: "bucket", bucket: r.bucket!, status: r.status!, n: r.n };
    case SETS.agent:
      return { set: "agent", id: r.agent_id!, n: r.n, failures: r.failures };
    case SETS.trigger:
      return r.trigger_id === null ? undefined : { set: "trigger", id: r.trigger_id, n: r.n, failures: r.failures };
    case SETS.word:
      return r.word === null ? undefined : { set: "word", status: r.status as "failed" | "timed_out", word: r.word, n: r.n };
    case SETS.duration:
      return r.d === null ? undefined : { set: "duration", ms: r.d, n: r.n };
  }
  return undefined;
}

// The tenant's queued runs now: their count from queued_run_counts (two rows
// however deep the backlog, where counting the runs read every queued one)
// and the oldest, the first entry of runs_queued (written as such: min(id),
// on a table with no statistics, was estimated at one row and aggregated
// over every queued one).
const QUEUED_NOW = `select (${QUEUED_COUNT}) as n, (select id from runs where tenant_id = $1 and status = 'queued' order by id limit 1) as oldest`;

export function createPgOverview(sql: Sql, timeoutMs: number): OverviewStore {
  const rollups = createPgRollups(sql, timeoutMs);
  // One slice's groups, in a transaction of its own: `enable_sort` off makes
  // the hashed plan the only one, whatever the row estimate. Both live
  // queries are planned at each call, as every statement of the main pool
  // is (openPostgres): kept, a plan made while the tenant had no runs (a new
  // deployment's dashboard) read every run at each call once there were
  // many (test/queue-cost.test.ts).
  const slice = (tenantId: string, q: OverviewQuery, from: number, to: number) =>
    sql.begin(async (tx) => {
      await tx`set local enable_sort = off`;
      await tx`set local work_mem = '32MB'`;
      const params = [tenantId, idFloor("run", from - ID_MARGIN_MS), idFloor("run", to + ID_MARGIN_MS), from, to, q.start, q.bucketMs];
      return within(tx.unsafe<GroupRow[]>(GROUPS, params, { prepare: true }), timeoutMs);
    });
  // The live query over [from, to) of the window, in SLICES side by side.
  const live = async (tenantId: string, q: OverviewQuery, from: number, to: number) => {
    const per = Math.ceil((to - from) / q.bucketMs / SLICES) * q.bucketMs;
    const slices: Promise<GroupRow[]>[] = [];
    for (let at = from; at < to; at += per) slices.push(slice(tenantId, q, at, Math.min(to, at + per)));
    const [events, ...groups] = await Promise.all([
      within(
        sql.unsafe<{ bucket: number; n: number }[]>(
          `select ((receive_time - $6) / $7)::int as bucket, count(*)::int as n from events
           where tenant_id = $1 and id >= $2 and id < $3 and receive_time >= $4 and receive_time < $5 group by 1`,
          [tenantId, idFloor("evt", from - ID_MARGIN_MS), idFloor("evt", to + ID_MARGIN_MS), from, to, q.start, q.bucketMs],
          { prepare: true },
        ),
        timeoutMs,
      ),
      ...slices,
    ]);
    return { events, groups: groups.flat().map(toGroup).filter((g): g is RunGroup => g !== undefined) };
  };
  // The rolled-up slots, in SLICES side by side as well.
  const rolled = async (tenantId: string, q: OverviewQuery, from: number, to: number) => {
    const per = Math.ceil((to - from) / SLOT_MS / SLICES) * SLOT_MS;
    const slices: Promise<RollupRow[]>[] = [];
    for (let at = from; at < to; at += per) slices.push(rollups.read(tenantId, at, Math.min(to, at + per), q.start, q.bucketMs));
    return fromRollups((await Promise.all(slices)).flat());
  };

  return {
    tenant: (tenantId: string, q: OverviewQuery): Promise<OverviewCounts> =>
      pg(async () => {
        const parts = readWindow(q, await rollups.watermark(tenantId));
        const [queued, ...answers] = await Promise.all([
          within(sql.unsafe<{ n: number; oldest: string | null }[]>(QUEUED_NOW, [tenantId], { prepare: true }), timeoutMs),
          ...(parts.rolled ? [rolled(tenantId, q, parts.rolled.from, parts.rolled.to)] : []),
          ...parts.live.map((r) => live(tenantId, q, r.from, r.to)),
        ]);
        const oldest = queued[0]?.oldest;
        return foldGroups(q, answers.flatMap((a) => a.groups), answers.flatMap((a) => a.events), {
          n: queued[0]?.n ?? 0,
          oldestTime: oldest ? idTime(oldest) : undefined,
        });
      }),
    unsealed: (now) => pg(() => rollups.unsealed(now)),
    seal: (tenantId, now) => pg(() => rollups.seal(tenantId, now)),
  };
}
