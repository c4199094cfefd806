// GetTenantOverview's store query on PostgreSQL at scale: 1,000,000 runs
// (and as many events) of one tenant over the last 7 days, beside 200,000
// runs of another tenant, seeded by SQL in id order as ingest writes them;
// never analyzed nor vacuumed (autovacuum is off here, as on a database
// whose statistics lag). Then the 7-day overview (168 hourly buckets, the
// percentiles, top failing agents and triggers, failure kinds, the queue)
// is read BENCH_OVERVIEW_REPEATS times from the runs (no slot sealed yet:
// the live query over every run); then the history is sealed (every
// tenant's passes, as the sealer makes them, timed: the rollups' whole cost,
// once) and the overview read as many times again, from the rollups and the
// live rows of the last slots. It prints each time, the median and the
// maximum, and checks both answers are the same. The target: under 500 ms.
import { OverviewWindow } from "../../gen/platform/v1/overview_pb.js";
import { overviewQuery } from "../../src/service/overview.js";
import { createPostgresStore } from "../../src/store/postgres/store.js";
import type { OverviewCounts } from "../../src/store/overview.js";
import { positiveInt } from "../lib/env.js";
import { freshDatabase } from "../lib/postgres.js";
import { printTable } from "../lib/table.js";
import postgres from "postgres";

const RUNS = positiveInt("BENCH_OVERVIEW_RUNS", 1_000_000);
const OTHER = positiveInt("BENCH_OVERVIEW_OTHER_RUNS", 200_000);
const REPEATS = positiveInt("BENCH_OVERVIEW_REPEATS", 5);
const WEEK = 7 * 24 * 3600_000;

// An id of `kind` made at `ms` (UUIDv7 layout), unique by `i`, in SQL.
const idAt = (kind: string, ms: string, i: string) =>
  `'${kind}_' || substr(lpad(to_hex(${ms}), 12, '0'), 1, 8) || '-' || substr(lpad(to_hex(${ms}), 12, '0'), 9, 4)
   || '-7' || lpad(to_hex(${i} % 4096), 3, '0') || '-8' || lpad(to_hex((${i} / 4096) % 4096), 3, '0') || '-' || lpad(to_hex(${i}), 12, '0')`;

async function seed(sql: postgres.Sql, tenant: string, n: number, start: number, tag: number, now: number) {
  const step = Math.floor(WEEK / n);
  // Status by residue: 90 % succeeded, 6 % failed (three kinds), 1 % timed
  // out, 1 % cancelled, 1 % running, 1 % queued; running and queued in the
  // last 10 minutes only, as a worker keeps them (a run times out in
  // minutes): before that, those residues ended succeeded and cancelled.
  await sql.unsafe(`
    insert into events (id, tenant_id, source_id, event_type, payload, receive_time, matched_trigger_ids, create_time, update_time)
    select ${idAt("evt", "t", "i")}, '${tenant}', 'src_bench', 'order.created', jsonb_build_object('order', i, 'total', i % 1000),
      t, '["trg_bench"]'::jsonb, t, t
    from (select i, ${start}::bigint + i::bigint * ${step} as t from generate_series(${tag}, ${tag + n - 1}) i) s`);
  await sql.unsafe(`
    insert into runs (id, tenant_id, agent_id, trigger_id, event_id, input, status, attempt, steps, error, start_time, end_time, create_time, update_time)
    select ${idAt("run", "t", "i")}, '${tenant}', 'agt_' || (i % 20), 'trg_' || (i % 50), ${idAt("evt", "t", "i")}, null,
      case when i % 100 < 90 then 'succeeded' when i % 100 < 96 then 'failed' when i % 100 = 96 then 'timed_out'
           when i % 100 = 97 then 'cancelled' when i % 100 = 98 then (case when open then 'running' else 'succeeded' end)
           when open then 'queued' else 'cancelled' end,
      1,
      jsonb_build_array(jsonb_build_object('kind', 'tool_call', 'tool', 'lookup', 'arguments', jsonb_build_object('order', i),
        'result', jsonb_build_object('ok', true), 'startTime', t + 5, 'endTime', t + 5 + i % 900)),
      case when i % 100 in (90, 91) then 'steps[0] (lookup): skill_timeout: no answer in 30 s'
           when i % 100 in (92, 93) then 'steps[0] (lookup): skill_error: upstream 500'
           when i % 100 in (94, 95) then 'steps[0].arguments: expression_error: undefined function'
           when i % 100 = 96 then 'agent timeout' else '' end,
      case when i % 100 < 99 then t + 5 end,
      case when i % 100 < 98 or not open then t + 10 + i % 1000 end,
      t, t
    from (select i, t, t >= ${now - 10 * 60_000} as open
          from (select i, ${start}::bigint + i::bigint * ${step} as t from generate_series(${tag}, ${tag + n - 1}) i) s) s`);
}

// Reads the overview REPEATS times; prints each and the median and maximum.
async function reads(label: string, read: () => Promise<OverviewCounts>): Promise<OverviewCounts> {
  const rows: string[][] = [];
  const times: number[] = [];
  let counts: OverviewCounts | undefined;
  for (let i = 0; i < REPEATS; i++) {
    const t = performance.now();
    counts = await read();
    const ms = performance.now() - t;
    times.push(ms);
    const total = Object.values(counts.runs).flat().reduce((a, b) => a + b, 0);
    rows.push([String(i + 1), ms.toFixed(0), total.toLocaleString(), counts.events.reduce((a, b) => a + b, 0).toLocaleString(),
      `${counts.durations.p50Ms}/${counts.durations.p95Ms}`, String(counts.queued)]);
    if (total !== RUNS) throw new Error(`the overview counted ${total} runs, not ${RUNS}`);
  }
  printTable(["read", "ms", "runs", "events", "p50/p95 ms", "queued"], rows);
  const sorted = [...times].sort((a, b) => a - b);
  console.log(`7-day overview over ${RUNS.toLocaleString()} runs, ${label}: median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms (target < 500 ms)`);
  return counts!;
}

async function main() {
  const db = await freshDatabase();
  const store = await createPostgresStore({ url: db.url, poolSize: 4, hotPathTimeoutMs: 60_000 });
  const sql = postgres(db.url, { max: 1, onnotice: () => {} });
  try {
    const now = Date.now();
    const q = overviewQuery(OverviewWindow.WEEK, now);
    const query = { start: q.start, bucketMs: q.bucketMs, buckets: q.buckets, top: q.top };
    await sql`insert into tenants (id, slug, create_time, update_time) values ('ten_a', 'a', 0, 0), ('ten_b', 'b', 0, 0)`;
    const t0 = performance.now();
    await seed(sql, "ten_a", RUNS, q.start, 0, now);
    await seed(sql, "ten_b", OTHER, q.start, RUNS, now);
    const seeded = performance.now() - t0;
    const [{ size }] = await sql<[{ size: string }]>`select pg_size_pretty(pg_total_relation_size('runs')) as size`;
    console.log(`seeded ${RUNS.toLocaleString()} + ${OTHER.toLocaleString()} runs and events in ${(seeded / 1000).toFixed(1)} s (runs: ${size}); not analyzed`);
    const live = await reads("every slot live (nothing sealed)", () => store.overview.tenant("ten_a", query));

    // Every tenant's passes until it is caught up, one after the other, as
    // runtime/overview-sealer.ts makes them (without its pauses).
    const passes: number[] = [];
    let slots = 0;
    const s0 = performance.now();
    for (const tenant of await store.overview.unsealed(now)) {
      for (;;) {
        const t = performance.now();
        const n = await store.overview.seal(tenant, now);
        if (!n) break;
        passes.push(performance.now() - t);
        slots += n;
      }
    }
    const sealMs = performance.now() - s0;
    const [{ rollups }] = await sql<[{ rollups: string }]>`select count(*)::text || ' rows, ' || pg_size_pretty(pg_total_relation_size('overview_rollups')) as rollups from overview_rollups`;
    console.log(`sealed ${slots} slots of 2 tenants in ${passes.length} passes: ${(sealMs / 1000).toFixed(1)} s, the longest pass ${(Math.max(...passes) / 1000).toFixed(1)} s (rollups: ${rollups})`);
    const rolled = await reads("sealed slots from rollups", () => store.overview.tenant("ten_a", query));
    if (JSON.stringify(rolled) !== JSON.stringify(live)) throw new Error("the overview from rollups differs from the live one");
    console.log("the answers from rollups and from the runs are the same");
  } finally {
    await sql.end();
    await store.close();
    if (!process.env.BENCH_OVERVIEW_KEEP) await db.drop();
    else console.log(`kept ${db.url}`);
  }
}

await main();
