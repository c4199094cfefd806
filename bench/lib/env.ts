// Benchmark settings from environment variables. Unset or empty takes the
// fallback; anything else must be an integer in range, or the bench fails
// before it starts.

function intFromEnv(name: string, fallback: number, min: number, kind: string): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be a ${kind} integer, got "${raw}"`);
  return n;
}

export function positiveInt(name: string, fallback: number): number {
  return intFromEnv(name, fallback, 1, "positive");
}

export function nonNegativeInt(name: string, fallback: number): number {
  return intFromEnv(name, fallback, 0, "non-negative");
}
