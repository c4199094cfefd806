import type Database from "better-sqlite3";
import { and, eq, isNull, or, sql } from "drizzle-orm";
import { StoreUnavailableError } from "./errors.js";
import { agents, events, triggers, webhookSources } from "./schema.js";
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
  const existingByKey = raw.prepare<[string, string], { id: string; receive_time: number }>(
    "select id, receive_time from events where source_id = ? and idempotency_key = ?",
  );
  const forgetKey = raw.prepare<[string]>("update events set idempotency_key = null where id = ?");
  const insertRun = prepareRunInsert(raw);

  // Insert first; the unique index on (source, key) decides, so concurrent
  // posts of one key store one event. A key older than the window is released.
  function ingestOne({ item, windowMs }: Pending): IngestResult {
    const e = item.event;
    const params = { ...e, payload: JSON.stringify(e.payload), matchedTriggerIds: JSON.stringify(e.matchedTriggerIds), idempotencyKey: e.idempotencyKey ?? null };
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
      run(() => db
        .select()
        .from(webhookSources)
        .where(
          or(
            eq(webhookSources.tokenDigest, digest),
            and(eq(webhookSources.previousTokenDigest, digest), sql`${webhookSources.previousTokenExpireTime} > ${now}`),
          ),
        )
        .get()),
    matchCandidates: (tenantId, sourceId) =>
      run(() => db
        .select({ trigger: triggers })
        .from(triggers)
        .innerJoin(agents, eq(agents.id, triggers.agentId))
        .where(
          and(
            eq(triggers.tenantId, tenantId),
            eq(triggers.kind, "webhook"),
            or(eq(triggers.sourceId, sourceId), isNull(triggers.sourceId)),
            eq(triggers.enabled, true),
            eq(agents.enabled, true),
          ),
        )
        .all()
        .map((r) => r.trigger)),
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
