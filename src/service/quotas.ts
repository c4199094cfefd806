import type { TenantRepo } from "../store/store.js";
import { onConflict, quotaExceeded } from "./errors.js";
import { QUOTA_VARIABLES, type Quotas } from "./limits.js";

const NOUNS: Record<keyof Quotas, string> = {
  agents: "agents",
  skills: "skills",
  triggers: "triggers",
  webhookSources: "webhook sources",
  members: "members",
  queuedRuns: "queued runs",
};

export function quotaError(tenantSlug: string, quotas: Quotas, kind: keyof Quotas) {
  return quotaExceeded(tenantSlug, quotas[kind], NOUNS[kind], QUOTA_VARIABLES[kind]);
}

// Creates a record unless the tenant is at its quota for that kind; the
// store counts and inserts in one transaction, so concurrent creates cannot
// overshoot.
export async function insertWithinQuota<Row, Insert>(
  repo: TenantRepo<Row, Insert>,
  row: Insert,
  tenant: { slug: string },
  quotas: Quotas,
  kind: keyof Quotas,
  // How a conflict is told, when the handler words it.
  conflictMessage?: string,
): Promise<Row> {
  const inserting = repo.insertWithin(row, quotas[kind]);
  const inserted = await (conflictMessage === undefined ? inserting : inserting.catch(onConflict(conflictMessage)));
  if (!inserted) throw quotaError(tenant.slug, quotas, kind);
  return inserted;
}
