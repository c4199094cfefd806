// Arithmetic both engines' rate-limit buckets share.
import type { RateLimitResult } from "./store.js";

// Milliseconds until a bucket holding `tokens` (< 1) has one again; the
// epsilon keeps float noise (50.000000001) from adding a millisecond.
export const msUntilToken = (tokens: number, ratePerSecond: number) => Math.max(1, Math.ceil(((1 - tokens) * 1000) / ratePerSecond - 1e-9));

// The answer to a take of up to `want` tokens from a bucket holding
// `tokens` (refilled): refused below one token, else what it holds whole.
export const answerTake = (tokens: number, want: number, ratePerSecond: number): RateLimitResult =>
  tokens >= 1 ? { ok: true, granted: Math.min(want, Math.floor(tokens)) } : { ok: false, retryAfterMs: msUntilToken(tokens, ratePerSecond) };
