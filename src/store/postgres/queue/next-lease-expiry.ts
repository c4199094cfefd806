import type { Sql } from "../open.js";

// The earliest lease expiry among running runs: the first entry of runs_leases.
export async function nextLeaseExpiry(sql: Sql): Promise<number | undefined> {
  const [row] = await sql<{ t: number | null }[]>`select min(lease_expire_time) as t from runs where status = 'running'`;
  return row?.t ?? undefined;
}
