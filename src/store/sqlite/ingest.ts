import type Database from "better-sqlite3";
import type { TriggerRow, WebhookSourceRow } from "../rows.js";
import { run, toStoreError } from "./errors.js";
import type { GroupCommitOptions } from "../group-commit.js";
import { batchedIngest, settleEach, type PendingIngest } from "../ingest-batch.js";
import type { WebhookStore } from "../store.js";
import { createIngestCommitter, encodeIngest, fromPlainError, type PlainError, type PlainOutcome } from "./ingest-commit.js";
import type { WriterThread } from "./writer.js";

// `writer`: ingest commits on the writer thread (a database file); without
// one, on this thread (an in-memory database is one connection's alone).
export function createSqliteWebhookStore(raw: Database.Database, options: GroupCommitOptions, writer?: WriterThread): WebhookStore {
  // The two lookups of every webhook request, prepared once. Rows come back
  // as arrays (better-sqlite3 builds an array faster than an object with
  // named keys) and are turned into the Drizzle row shape here, keys in
  // schema order.
  const SOURCE_COLUMNS = `id, tenant_id, name, enabled, kind, token_digest, previous_token_digest, previous_token_expire_time,
    signing_secret, previous_signing_secret, previous_signing_secret_expire_time, mapping, create_time, update_time`;
  const sourceByDigest = raw
    .prepare<[string, string, number], unknown[]>(
      `select ${SOURCE_COLUMNS}
       from webhook_sources
       where token_digest = ?
          or (previous_token_digest = ? and previous_token_expire_time > ?)`,
    )
    .raw(true);
  const sourceById = raw.prepare<[string], unknown[]>(`select ${SOURCE_COLUMNS} from webhook_sources where id = ?`).raw(true);
  // Columns the where clause pins are not read back (every value costs):
  // tenant_id and kind equal the bound text (binary collation), enabled is 1,
  // and source_id is either the bound source or null.
  const candidates = raw
    .prepare<[string, string], unknown[]>(
      `select t.id, t.agent_id, t.source_id is null, t.event_type_pattern, t.filter, t.cron, t.timezone, t.create_time,
         t.update_time
       from triggers t join agents a on a.id = t.agent_id
       where t.tenant_id = ? and t.kind = 'webhook' and (t.source_id = ? or t.source_id is null)
         and t.enabled = 1 and a.enabled = 1`,
    )
    .raw(true);
  const sourceRow = (v: unknown[]): WebhookSourceRow => ({
    id: v[0] as string,
    tenantId: v[1] as string,
    name: v[2] as string,
    enabled: Boolean(v[3]),
    kind: v[4] as WebhookSourceRow["kind"],
    tokenDigest: v[5] as string | null,
    previousTokenDigest: v[6] as string | null,
    previousTokenExpireTime: v[7] as number | null,
    signingSecret: v[8] as string | null,
    previousSigningSecret: v[9] as string | null,
    previousSigningSecretExpireTime: v[10] as number | null,
    mapping: v[11] as string | null,
    createTime: v[12] as number,
    updateTime: v[13] as number,
  });
  const triggerRow = (tenantId: string, sourceId: string, v: unknown[]): TriggerRow => ({
    id: v[0] as string,
    tenantId,
    agentId: v[1] as string,
    enabled: true,
    kind: "webhook",
    sourceId: v[2] ? null : sourceId,
    eventTypePattern: v[3] as string | null,
    filter: v[4] as string | null,
    cron: v[5] as string | null,
    timezone: v[6] as string | null,
    // Diagnostics only; matching never reads them.
    filterError: null,
    filterErrorTime: null,
    createTime: v[7] as number,
    updateTime: v[8] as number,
  });

  const encode = (batch: PendingIngest[]) => batch.map((p) => encodeIngest(p.write.item, p.write.windowMs));
  const settled = (batch: PendingIngest[], outcomes: PlainOutcome[]) =>
    settleEach(batch, outcomes, (error) => toStoreError(fromPlainError(error as PlainError)));
  const commitHere = writer ? undefined : createIngestCommitter(raw);
  const commit = commitHere
    ? (batch: PendingIngest[]) => settled(batch, commitHere(encode(batch)))
    : async (batch: PendingIngest[]) => settled(batch, await writer!.commit(encode(batch)));

  return {
    findSourceByTokenDigest: (digest, now) =>
      run(() => {
        const values = sourceByDigest.get(digest, digest, now);
        return values && sourceRow(values);
      }),
    findSourceById: (id) =>
      run(() => {
        const values = sourceById.get(id);
        return values && sourceRow(values);
      }),
    matchCandidates: (tenantId, sourceId) =>
      run(() => candidates.all(tenantId, sourceId).map((v) => triggerRow(tenantId, sourceId, v))),
    ingest: batchedIngest(commit, options),
  };
}
