// What a run claim takes, the same on every engine; the engines fetch the
// candidates and take the picked runs under their own locking.
//
// Fairness between tenants. Each tenant's claimable queued runs are ranked
// oldest first, and the rank starts after the tenant's runs already running
// (on any worker of any replica): rank = running(tenant) + k for its k-th
// oldest queued run. A claim of n takes the n lowest ranks, the older run
// first on a tie. So a claim takes one run of every waiting tenant before a
// second of any (round robin), and a tenant whose runs occupy the workers
// waits behind one with none running: a tenant with 10,000 queued runs delays
// another tenant's single run by at most one claim, whatever the claim size.
//
// Cost. A claim of n reads each waiting tenant's n oldest queued runs (an
// index seek per tenant on runs_queued (tenant_id, id where queued)) and the
// running runs (bounded by the workers of the cluster): it grows with the
// tenants that have queued runs, not with their backlog.
//
// max_concurrent_runs. A capped agent gets at most cap - running(agent) more
// runs; its other runs stay queued, and they do not hold back the tenant's
// other agents: an agent already at its cap is left out of the candidates.
// An expired lease of the agent is running already and is taken over as it is.

// The error of a run whose lease expired on its last attempt.
export const WORKER_LOST_ERROR =
  "worker_lost: the lease expired on the last attempt; the run's worker stopped or stalled before finishing each attempt";

export interface QueuedCandidate {
  id: string;
  tenantId: string;
  agentId: string;
  // The agent's max_concurrent_runs when it has one (> 0).
  cap: number | null;
}

// Runs in `running`, counted per agent.
export interface RunningCount {
  tenantId: string;
  agentId: string;
  // The agent's max_concurrent_runs when it has one (> 0).
  cap: number | null;
  n: number;
}

// The claim's pick, driven by its engine: each value yielded is the agents to
// leave out of the candidates, to be answered (through next()) with every
// tenant's `perTenant` oldest queued runs of the other agents, oldest first;
// the return value is the runs to take, best first. Candidates are asked for
// again only when a capped agent's runs filled a tenant's share and hid runs
// behind them.
export function* fairPick(running: RunningCount[], perTenant: number, limit: number): Generator<string[], QueuedCandidate[], QueuedCandidate[]> {
  const busy = new Map<string, number>();
  const cap = new Map<string, { cap: number; n: number }>();
  for (const r of running) {
    busy.set(r.tenantId, (busy.get(r.tenantId) ?? 0) + r.n);
    if (r.cap !== null) cap.set(r.agentId, { cap: r.cap, n: r.n });
  }
  const full = (agentId: string) => {
    const c = cap.get(agentId);
    return c !== undefined && c.n >= c.cap;
  };
  // Runs of capped agents, fetched before those agents were left out.
  let kept: QueuedCandidate[] = [];
  const excluded = new Set(running.filter((r) => full(r.agentId)).map((r) => r.agentId));
  for (;;) {
    const fetched = yield [...excluded];
    const byTenant = new Map<string, { list: QueuedCandidate[]; fetched: number }>();
    for (const [c, isFetched] of [...kept.map((c) => [c, false] as const), ...fetched.map((c) => [c, true] as const)]) {
      let t = byTenant.get(c.tenantId);
      if (!t) byTenant.set(c.tenantId, (t = { list: [], fetched: 0 }));
      t.list.push(c);
      if (isFetched) t.fetched++;
    }
    const ranked: { c: QueuedCandidate; rank: number }[] = [];
    const hiding = new Set<string>();
    const room = new Map<string, number>();
    for (const [tenantId, t] of byTenant) {
      t.list.sort((a, b) => compare(a.id, b.id));
      let k = busy.get(tenantId) ?? 0;
      for (const c of t.list) {
        if (c.cap !== null) {
          const left = room.get(c.agentId) ?? c.cap - (cap.get(c.agentId)?.n ?? 0);
          room.set(c.agentId, left - 1);
          if (left <= 0) {
            if (t.fetched >= perTenant && !excluded.has(c.agentId)) hiding.add(c.agentId);
            continue;
          }
        }
        ranked.push({ c, rank: ++k });
      }
    }
    if (!hiding.size) {
      ranked.sort((a, b) => a.rank - b.rank || compare(a.c.id, b.c.id));
      return ranked.slice(0, limit).map((r) => r.c);
    }
    kept = [...kept, ...fetched.filter((c) => hiding.has(c.agentId))];
    for (const a of hiding) excluded.add(a);
  }
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

// Runs a pick whose candidates come synchronously (SQLite, in a transaction).
export function pickSync(pick: Generator<string[], QueuedCandidate[], QueuedCandidate[]>, fetch: (excluded: string[]) => QueuedCandidate[]): QueuedCandidate[] {
  let step = pick.next();
  while (!step.done) step = pick.next(fetch(step.value));
  return step.value;
}

// Runs a pick whose candidates come from a query.
export async function pickAsync(
  pick: Generator<string[], QueuedCandidate[], QueuedCandidate[]>,
  fetch: (excluded: string[]) => Promise<QueuedCandidate[]>,
): Promise<QueuedCandidate[]> {
  let step = pick.next();
  while (!step.done) step = pick.next(await fetch(step.value));
  return step.value;
}
