import type { TenantRepo } from "../store/store.js";
import { fromStoreError, quotaExceeded } from "./errors.js";
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
  onStoreError: (err: unknown) => never = fromStoreError,
): Promise<Row> {
  const inserted = await repo.insertWithin(row, quotas[kind]).catch(onStoreError);
  if (!inserted) throw quotaError(tenant.slug, quotas, kind);
  return inserted;
}
