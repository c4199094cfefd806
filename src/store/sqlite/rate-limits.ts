import type Database from "better-sqlite3";
import type { BucketTake, RateLimitResult, RateLimitStore } from "../store.js";
import { answerTake } from "../token-bucket.js";
import { run } from "./errors.js";

export type TakeArgs = Parameters<RateLimitStore["take"]>;

// The token buckets every process on the file shares, one row per key, read
// and written under the write lock (an immediate transaction), every take of
// a call in one. `raw` is a connection of its own with synchronous=NORMAL: in
// WAL mode its commits skip the fsync that a synchronous=FULL commit pays,
// which a bucket does not need (a power loss only refills it), while
// checkpoints still sync.

export function createBucketTake(raw: Database.Database): (...args: TakeArgs) => RateLimitResult[] {
  const read = raw.prepare<[string], { tokens: number; refill_time: number }>("select tokens, refill_time from rate_limit_buckets where key = ?");
  const write = raw.prepare(
    `insert into rate_limit_buckets (key, tokens, refill_time) values (?, ?, ?)
     on conflict (key) do update set tokens = excluded.tokens, refill_time = excluded.refill_time`,
  );
  const takeOne = ({ key, ratePerSecond: rate, burst, want }: BucketTake, now: number): RateLimitResult => {
    const bucket = read.get(key);
    // A key seen for the first time starts full; a clock behind the bucket's
    // refills nothing.
    const tokens = bucket ? Math.min(burst, bucket.tokens + (Math.max(0, now - bucket.refill_time) * rate) / 1000) : burst;
    const answer = answerTake(tokens, want, rate);
    if (answer.ok) write.run(key, tokens - answer.granted, Math.max(bucket?.refill_time ?? now, now));
    return answer;
  };
  const takeAll = raw.transaction((takes: BucketTake[], now: number) => takes.map((t) => takeOne(t, now)));
  return (takes, now) => takeAll.immediate(takes, now);
}

// On this thread (an in-memory database); a database file's buckets are
// taken on the writer thread (writer.ts), so that waiting for the write
// lock never holds the HTTP thread.
export function createSqliteRateLimits(raw: Database.Database): RateLimitStore {
  const take = createBucketTake(raw);
  return { take: (...args) => run(() => take(...args)) };
}
