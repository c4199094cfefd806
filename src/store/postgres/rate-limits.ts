import type { RateLimitResult, RateLimitStore } from "../store.js";
import { msUntilToken } from "../token-bucket.js";
import type { Sql } from "./open.js";
import { pg } from "./errors.js";

// The token bucket every replica shares, one row per key. Each take is one
// statement: it locks the row, refills it for the time elapsed since its last
// refill (never backwards: a replica whose clock is behind refills nothing),
// and takes what it can. The row lock orders concurrent takes, so the tokens
// granted across replicas never exceed the refill. A key seen for the first
// time starts full. The table is unlogged (see its migration): a take waits
// for no WAL flush, and a crash only refills the buckets.
export function createPgRateLimits(sql: Sql): RateLimitStore {
  async function take(key: string, rate: number, burst: number, now: number, want: number): Promise<RateLimitResult> {
    for (;;) {
      const [bucket] = await sql<{ refilled: number }[]>`
        with old as (
          select key, refill_time,
            least(${burst}::float8, tokens + greatest(0, ${now}::int8 - refill_time) * ${rate}::float8 / 1000) as refilled
          from rate_limit_buckets where key = ${key} for update
        ), taken as (
          update rate_limit_buckets b
          set tokens = old.refilled - least(${want}::int4, floor(old.refilled)),
              refill_time = greatest(old.refill_time, ${now}::int8)
          from old where b.key = old.key and old.refilled >= 1
        )
        select refilled from old`;
      if (bucket)
        return bucket.refilled >= 1
          ? { ok: true, granted: Math.min(want, Math.floor(bucket.refilled)) }
          : { ok: false, retryAfterMs: msUntilToken(bucket.refilled, rate) };
      const granted = Math.min(want, Math.floor(burst));
      const inserted = await sql`
        insert into rate_limit_buckets (key, tokens, refill_time) values (${key}, ${burst - granted}::float8, ${now}::int8)
        on conflict (key) do nothing returning key`;
      // Another replica created it meanwhile: take from its row.
      if (inserted.length) return { ok: true, granted };
    }
  }
  return {
    take: (key, rate, burst, now, want = 1) => pg(() => take(key, rate, burst, now, want)),
  };
}
