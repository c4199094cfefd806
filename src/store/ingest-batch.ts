// What both engines' ingest share around their own SQL: the batching, the
// quota's outcome, and how each item of a batch is settled.
import { StoreQuotaError, StoreUnavailableError } from "./errors.js";
import { batchCommits, type GroupCommitOptions, type Pending } from "./group-commit.js";
import type { IngestItem, IngestResult, WebhookStore } from "./store.js";

// An event with its runs, and how long its idempotency key holds.
export interface IngestWrite {
  item: IngestItem;
  windowMs: number;
}
export type PendingIngest = Pending<IngestWrite, IngestResult>;

// An item refused by its tenant's queued-runs cap: nothing of it was stored.
// A string, so an outcome crosses between threads as it is.
export const OVER_QUOTA = "over quota";
export type Outcome = IngestResult | typeof OVER_QUOTA;

// Queued runs per tenant as of this point of a transaction.
export type Tally = Map<string, number>;

// An item of a batch committed item by item: its outcome, or the error that
// rolled its savepoint back.
export type ItemOutcome = { ok: true; result: Outcome } | { ok: false; error: unknown };

export function settle(p: PendingIngest, outcome: Outcome): void {
  if (outcome === OVER_QUOTA) p.reject(new StoreQuotaError("the tenant's queued runs are at their cap"));
  else p.resolve(outcome);
}

// `toStoreError`: the engine's translation of an item's own error.
export function settleEach(batch: PendingIngest[], outcomes: ItemOutcome[], toStoreError: (err: unknown) => unknown): void {
  outcomes.forEach((o, i) => (o.ok ? settle(batch[i]!, o.result) : batch[i]!.reject(toStoreError(o.error))));
}

// The webhook store's ingest over an engine's batch commit (see
// batchCommits). A commit that fails as a whole stored nothing it left
// unsettled: those items answer unavailable.
export function batchedIngest(
  commit: (batch: PendingIngest[]) => void | Promise<void>,
  options: GroupCommitOptions,
): WebhookStore["ingest"] {
  const write = batchCommits(commit, options, (err) => new StoreUnavailableError(`ingest commit failed: ${(err as Error).message}`));
  return (item, windowMs) => write({ item, windowMs });
}
