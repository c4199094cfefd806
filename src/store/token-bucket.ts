// Arithmetic both engines' rate-limit buckets share.

// Milliseconds until a bucket holding `tokens` (< 1) has one again; the
// epsilon keeps float noise (50.000000001) from adding a millisecond.
export const msUntilToken = (tokens: number, ratePerSecond: number) => Math.max(1, Math.ceil(((1 - tokens) * 1000) / ratePerSecond - 1e-9));
