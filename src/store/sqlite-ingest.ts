import type Database from "better-sqlite3";
import { sql } from "drizzle-orm";
import { StoreUnavailableError } from "./errors.js";
import { events, type TriggerRow, type WebhookSourceRow } from "./schema.js";
import type { Db } from "./sqlite.js";
import { run, toStoreError } from "./sqlite-errors.js";
import { prepareRunInsert } from "./sqlite-queue.js";
import type { IngestItem, IngestResult, WebhookStore } from "./store.js";

export interface GroupCommitOptions {
  // How long the first request of a batch waits for others; 0 commits what
  // arrived in the same event-loop turn (requests that queued up during the
  // previous commit's fsync form the next batch, so batches grow with load).
  windowMs: number;
  maxBatch: number;
}

interface Pending {
  item: IngestItem;
  windowMs: number;
  resolve: (r: IngestResult) => void;
  reject: (e: unknown) => void;
}

export function createSqliteWebhookStore(db: Db, raw: Database.Database, options: GroupCommitOptions): WebhookStore {
  const insertEvent = db
    .insert(events)
    .values({
      id: sql.placeholder("id"),
      tenantId: sql.placeholder("tenantId"),
      sourceId: sql.placeholder("sourceId"),
      eventType: sql.placeholder("eventType"),
      payload: sql.placeholder("payload"),
      receiveTime: sql.placeholder("receiveTime"),
      idempotencyKey: sql.placeholder("idempotencyKey"),
      matchedTriggerIds: sql.placeholder("matchedTriggerIds"),
      createTime: sql.placeholder("createTime"),
      updateTime: sql.placeholder("updateTime"),
    })
    .onConflictDoNothing()
    .returning({ id: events.id })
    .prepare();
  // The two lookups of every webhook request, prepared once.
  const sourceByDigest = raw.prepare<{ digest: string; now: number }, WebhookSourceRow>(
    `select id, tenant_id as tenantId, name, enabled, token_digest as tokenDigest,
       previous_token_digest as previousTokenDigest, previous_token_expire_time as previousTokenExpireTime,
       create_time as createTime, update_time as updateTime
     from webhook_sources
     where token_digest = @digest
        or (previous_token_digest = @digest and previous_token_expire_time > @now)`,
  );
  const candidates = raw.prepare<{ tenantId: string; sourceId: string }, TriggerRow>(
    `select t.id, t.tenant_id as tenantId, t.agent_id as agentId, t.enabled, t.kind, t.source_id as sourceId,
       t.event_type_pattern as eventTypePattern, t.filter, t.cron, t.timezone,
       t.create_time as createTime, t.update_time as updateTime
     from triggers t join agents a on a.id = t.agent_id
     where t.tenant_id = @tenantId and t.kind = 'webhook' and (t.source_id = @sourceId or t.source_id is null)
       and t.enabled = 1 and a.enabled = 1`,
  );
  const existingByKey = raw.prepare<[string, string], { id: string; receive_time: number }>(
    "select id, receive_time from events where source_id = ? and idempotency_key = ?",
  );
  const forgetKey = raw.prepare<[string]>("update events set idempotency_key = null where id = ?");
  const insertRun = prepareRunInsert(raw);

  // Insert first; the unique index on (source, key) decides, so concurrent
  // posts of one key store one event. A key older than the window is released.
  function ingestOne({ item, windowMs }: Pending): IngestResult {
    const e = item.event;
    // Drizzle encodes the JSON columns itself.
    const params = { ...e, idempotencyKey: e.idempotencyKey ?? null };
    if (insertEvent.get(params as never) === undefined) { // placeholders are typed loosely by drizzle
      const existing = existingByKey.get(e.sourceId, e.idempotencyKey!);
      if (!existing) throw new Error("event insert conflicted on a key that does not exist");
      if (existing.receive_time > e.receiveTime - windowMs) return { duplicate: true, eventId: existing.id };
      forgetKey.run(existing.id);
      if (insertEvent.get(params as never) === undefined) throw new Error("event insert conflicted twice"); // as above
    }
    for (const r of item.runs) insertRun.run(r);
    return { duplicate: false, eventId: e.id };
  }

  // Each item in its own savepoint: one bad item fails alone, the batch commits.
  const ingestItem = raw.transaction((p: Pending) => ingestOne(p));
  const commitBatch = raw.transaction((batch: Pending[]) =>
    batch.map((p): { ok: true; result: IngestResult } | { ok: false; error: unknown } => {
      try {
        return { ok: true, result: ingestItem(p) };
      } catch (error) {
        return { ok: false, error };
      }
    }),
  );

  const queue: Pending[] = [];
  let scheduled = false;

  function flush() {
    scheduled = false;
    const batch = queue.splice(0, options.maxBatch);
    if (queue.length) schedule();
    if (!batch.length) return;
    let outcomes: ReturnType<typeof commitBatch>;
    try {
      outcomes = commitBatch(batch);
    } catch (err) {
      // The whole transaction rolled back: nothing of the batch was stored.
      const error = new StoreUnavailableError(`ingest commit failed: ${(err as Error).message}`);
      for (const p of batch) p.reject(error);
      return;
    }
    outcomes.forEach((o, i) => (o.ok ? batch[i]!.resolve(o.result) : batch[i]!.reject(toStoreError(o.error))));
  }

  function schedule() {
    if (scheduled) return;
    scheduled = true;
    if (options.windowMs > 0) setTimeout(flush, options.windowMs);
    else setImmediate(flush);
  }

  return {
    findSourceByTokenDigest: (digest, now) =>
      run(() => {
        const row = sourceByDigest.get({ digest, now });
        return row && { ...row, enabled: Boolean(row.enabled) };
      }),
    matchCandidates: (tenantId, sourceId) =>
      run(() => candidates.all({ tenantId, sourceId }).map((t) => ({ ...t, enabled: Boolean(t.enabled) }))),
    ingest: (item, idempotencyWindowMs) =>
      new Promise<IngestResult>((resolve, reject) => {
        queue.push({ item, windowMs: idempotencyWindowMs, resolve, reject });
        if (queue.length >= options.maxBatch) {
          scheduled = false;
          flush();
        } else schedule();
      }),
  };
}
