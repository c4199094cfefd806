import { sql as sqlTag } from "drizzle-orm";
import type { TransactionSql } from "postgres";
import type { Db } from "./open.js";

export type DbTransaction = Parameters<Parameters<Db["transaction"]>[0]>[0];

// A transaction-scoped advisory lock on one kind of rows of one tenant (e.g.
// its members, its queued runs): a count-then-write of every replica on the
// same scope waits for the holder's commit. Keys are hashes, so two scopes
// may share a lock; that only serializes them, it never lets a check race.
export async function lockTenantScope(tx: DbTransaction | TransactionSql, scope: string, tenantId: string): Promise<void> {
  if (typeof tx === "function") await tx`select pg_advisory_xact_lock(hashtext(${scope}), hashtext(${tenantId}))`;
  else await tx.execute(sqlTag`select pg_advisory_xact_lock(hashtext(${scope}), hashtext(${tenantId}))`);
}
