import type { BucketTake, RateLimitResult, RateLimitStore } from "../store.js";
import { answerTake } from "../token-bucket.js";
import type { Sql } from "./open.js";
import { pg } from "./errors.js";

// The token buckets every replica shares, one row per key. A call's takes
// are one statement: it locks their rows in key order (two replicas taking
// overlapping keys wait for each other, never deadlock), refills each for
// the time elapsed since its last refill (never backwards: a replica whose
// clock is behind refills nothing), and takes what it can. The row lock
// orders concurrent takes, so the tokens granted across replicas never
// exceed the refill. A key seen for the first time starts full: inserted by
// a second statement (in key order too: replicas inserting the same new keys
// wait for each other's insert), and taken by the first statement again
// when another replica inserted it meanwhile. The table is unlogged (see its migration): a take
// waits for no WAL flush, and a crash only refills the buckets.

// Planned at every call (an unnamed statement, sql.unsafe's default), with
// the call's own keys: a plan cached while the table was nearly empty would
// read it whole once it holds every source's bucket.
const TAKE = `
  with asked as (
    select * from jsonb_to_recordset($1::text::jsonb) as a(key text, "ratePerSecond" float8, burst float8, want int8)
  ), locked as (
    select b.key, b.tokens, b.refill_time from rate_limit_buckets b
    where b.key in (select key from asked) order by b.key for update
  ), old as (
    select l.key, l.refill_time, a.want,
      least(a.burst, l.tokens + greatest(0, $2::int8 - l.refill_time) * a."ratePerSecond" / 1000) as refilled
    from locked l join asked a using (key)
  ), taken as (
    update rate_limit_buckets b
    set tokens = old.refilled - least(old.want, floor(old.refilled)),
        refill_time = greatest(old.refill_time, $2::int8)
    from old where b.key = old.key and old.refilled >= 1
  )
  select key, refilled from old`;

const CREATE = `
  insert into rate_limit_buckets (key, tokens, refill_time)
  select key, burst - least(want, floor(burst)), $2::int8
  from jsonb_to_recordset($1::text::jsonb) as f(key text, burst float8, want int8)
  order by key
  on conflict (key) do nothing returning key`;

export function createPgRateLimits(sql: Sql): RateLimitStore {
  async function take(takes: BucketTake[], now: number): Promise<RateLimitResult[]> {
    if (new Set(takes.map((t) => t.key)).size !== takes.length) throw new Error("a rate-limit call's keys must be distinct");
    const results = new Map<string, RateLimitResult>();
    let pending = takes;
    while (pending.length) {
      const rows = await sql.unsafe<{ key: string; refilled: number }[]>(TAKE, [JSON.stringify(pending), now]);
      const refilled = new Map(rows.map((r) => [r.key, r.refilled]));
      for (const t of pending) {
        const tokens = refilled.get(t.key);
        if (tokens !== undefined) results.set(t.key, answerTake(tokens, t.want, t.ratePerSecond));
      }
      const fresh = pending.filter((t) => !results.has(t.key));
      if (!fresh.length) break;
      const created = new Set((await sql.unsafe<{ key: string }[]>(CREATE, [JSON.stringify(fresh), now])).map((r) => r.key));
      // Each starts full: the burst (at least one token, as configured) less what it granted.
      for (const t of fresh) if (created.has(t.key)) results.set(t.key, answerTake(t.burst, t.want, t.ratePerSecond));
      // Another replica created the rest meanwhile: take from their rows.
      pending = fresh.filter((t) => !created.has(t.key));
    }
    return takes.map((t) => results.get(t.key)!);
  }
  return { take: (takes, now) => pg(() => take(takes, now)) };
}
