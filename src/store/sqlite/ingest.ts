import type Database from "better-sqlite3";
import type { TriggerRow, WebhookSourceRow } from "../rows.js";
import { run, toStoreError } from "./errors.js";
import { prepareQueuedCount, prepareRunInsert } from "./queue.js";
import type { GroupCommitOptions } from "../group-commit.js";
import { batchedIngest, OVER_QUOTA, settle, settleEach, type ItemOutcome, type Outcome, type PendingIngest, type Tally } from "../ingest-batch.js";
import type { IngestItem, WebhookStore } from "../store.js";

// Thrown out of the whole-batch transaction when one item failed, so that
// commit() tells an item's failure (retry item by item) from a failed commit.
class ItemFailed {
  constructor(readonly error: unknown) {}
}

export function createSqliteWebhookStore(raw: Database.Database, options: GroupCommitOptions): WebhookStore {
  // Every statement of the hot path is prepared once. Rows come back as arrays
  // (better-sqlite3 builds an array faster than an object with named keys)
  // and are turned into the Drizzle row shape here, keys in schema order.
  const insertEvent = raw.prepare<
    [string, string, string, string, string, number, string | null, string, number, number]
  >(
    `insert into events (id, tenant_id, source_id, event_type, payload, receive_time, idempotency_key, matched_trigger_ids,
       create_time, update_time)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     on conflict (source_id, idempotency_key) where idempotency_key is not null do nothing`,
  );
  // The two lookups of every webhook request.
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
  const existingByKey = raw.prepare<[string, string], { id: string; receive_time: number }>(
    "select id, receive_time from events where source_id = ? and idempotency_key = ?",
  );
  const forgetKey = raw.prepare<[string]>("update events set idempotency_key = null where id = ?");
  const insertRun = prepareRunInsert(raw);
  const queuedCount = prepareQueuedCount(raw);

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

  // False when the insert hit a uniqueness conflict and stored nothing. The
  // JSON columns are encoded once, as Drizzle's json mode does.
  const insertEventRow = (e: IngestItem["event"]): boolean =>
    insertEvent.run(
      e.id,
      e.tenantId,
      e.sourceId,
      e.eventType,
      JSON.stringify(e.payload),
      e.receiveTime,
      e.idempotencyKey ?? null,
      JSON.stringify(e.matchedTriggerIds),
      e.createTime,
      e.updateTime,
    ).changes === 1;

  // The tenant's cap first (the transaction is immediate: no other writer
  // queues runs between the count and the insert). Then insert; the unique
  // index on (source, key) decides, so concurrent posts of one key store one
  // event. A key older than the window is released.
  function ingestOne({ write: { item, windowMs } }: PendingIngest, tally: Tally): Outcome {
    const e = item.event;
    const queued = item.runs.length ? (tally.get(e.tenantId) ?? queuedCount.get(e.tenantId)!) : 0;
    if (queued + item.runs.length > (item.maxQueuedRuns ?? Infinity)) return OVER_QUOTA;
    if (!insertEventRow(e)) {
      const existing = existingByKey.get(e.sourceId, e.idempotencyKey!);
      if (!existing) throw new Error("event insert conflicted on a key that does not exist");
      if (existing.receive_time > e.receiveTime - windowMs) return { duplicate: true, eventId: existing.id };
      forgetKey.run(existing.id);
      if (!insertEventRow(e)) throw new Error("event insert conflicted twice");
    }
    for (const r of item.runs) insertRun.run(r);
    if (item.runs.length) tally.set(e.tenantId, queued + item.runs.length);
    return { duplicate: false, eventId: e.id };
  }

  // The common case: the whole batch in one transaction, no savepoints. An
  // item that throws rolls the whole transaction back (nothing of the batch is
  // stored) and the batch is committed again by commitEach.
  const commitAll = raw.transaction((batch: PendingIngest[]) => {
    const tally: Tally = new Map();
    return batch.map((p) => {
      try {
        return ingestOne(p, tally);
      } catch (error) {
        throw new ItemFailed(error);
      }
    });
  });
  // Each item in its own savepoint: one bad item fails alone, the batch
  // commits. The item's own tally, merged once its savepoint is released, so
  // a rolled-back item's runs are not counted.
  const ingestItem = raw.transaction((p: PendingIngest, tally: Tally) => ingestOne(p, tally));
  const commitEach = raw.transaction((batch: PendingIngest[]) => {
    const tally: Tally = new Map();
    return batch.map((p): ItemOutcome => {
      const mine: Tally = new Map(tally);
      try {
        const result = ingestItem(p, mine);
        for (const [tenantId, n] of mine) tally.set(tenantId, n);
        return { ok: true, result };
      } catch (error) {
        return { ok: false, error };
      }
    });
  });

  // Immediate: the write lock from BEGIN, so the quota's count and the
  // inserts see one state of the database. An error other than an item's
  // rolled the whole transaction back: nothing of the batch was stored.
  function commit(batch: PendingIngest[]): void {
    try {
      const results = commitAll.immediate(batch);
      batch.forEach((p, i) => settle(p, results[i]!));
      return;
    } catch (err) {
      if (!(err instanceof ItemFailed)) throw err;
    }
    settleEach(batch, commitEach.immediate(batch), toStoreError);
  }

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
