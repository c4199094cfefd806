// The ingest transaction on SQLite: events and their runs, a batch at a time.
// It runs on whichever thread owns the connection it is given: the store's
// writer thread (writer.ts) for a database file, the calling thread for an
// in-memory one. Its input and output are plain data, so a batch
// crosses between threads as it is.
import type Database from "better-sqlite3";
import type { RunInsert } from "../rows.js";
import { OVER_QUOTA, type Outcome, type Tally } from "../ingest-batch.js";
import type { IngestItem } from "../store.js";
import { prepareQueuedCount, prepareRunInsert } from "./queue.js";

// An event as its row is bound: the JSON columns already encoded, on the
// thread that received the event (a string crosses to another thread as one
// copy; an object is cloned node by node).
export type EncodedEvent = [
  id: string,
  tenantId: string,
  sourceId: string,
  eventType: string,
  payload: string,
  receiveTime: number,
  idempotencyKey: string | null,
  matchedTriggerIds: string,
  createTime: number,
  updateTime: number,
];

export interface EncodedIngest {
  event: EncodedEvent;
  runs: RunInsert[];
  maxQueuedRuns: number | null;
  // How long the event's idempotency key holds.
  windowMs: number;
}

// An error as it crosses threads: a structured clone keeps an Error's
// message but not its SQLite code, which decides what the caller is told.
export interface PlainError {
  code?: string;
  message: string;
}

export type PlainOutcome = { ok: true; result: Outcome } | { ok: false; error: PlainError };

export const encodeIngest = (item: IngestItem, windowMs: number): EncodedIngest => {
  const e = item.event;
  return {
    event: [
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
    ],
    runs: item.runs,
    maxQueuedRuns: item.maxQueuedRuns ?? null,
    windowMs,
  };
};

export const plainError = (err: unknown): PlainError => {
  const code = (err as { code?: unknown }).code;
  return { ...(typeof code === "string" && { code }), message: err instanceof Error ? err.message : String(err) };
};

// Back to an Error with its code, for the store's translation (errors.ts).
export const fromPlainError = (e: PlainError): Error => Object.assign(new Error(e.message), e.code === undefined ? {} : { code: e.code });

// Thrown out of the whole-batch transaction when one item failed, so that a
// failed item (retried item by item) is told from a failed commit.
class ItemFailed {
  constructor(readonly error: unknown) {}
}

// Commits a batch and answers each item's outcome in order; throws when the
// commit itself failed (nothing of the batch was stored).
export function createIngestCommitter(raw: Database.Database): (batch: EncodedIngest[]) => PlainOutcome[] {
  const insertEvent = raw.prepare<EncodedEvent>(
    `insert into events (id, tenant_id, source_id, event_type, payload, receive_time, idempotency_key, matched_trigger_ids,
       create_time, update_time)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     on conflict (source_id, idempotency_key) where idempotency_key is not null do nothing`,
  );
  const existingByKey = raw.prepare<[string, string], { id: string; receive_time: number }>(
    "select id, receive_time from events where source_id = ? and idempotency_key = ?",
  );
  const forgetKey = raw.prepare<[string]>("update events set idempotency_key = null where id = ?");
  const insertRun = prepareRunInsert(raw);
  const queuedCount = prepareQueuedCount(raw);

  // False when the insert hit a uniqueness conflict and stored nothing.
  const insertEventRow = (e: EncodedEvent): boolean => insertEvent.run(...e).changes === 1;

  // The tenant's cap first (the transaction is immediate: no other writer
  // queues runs between the count and the insert). Then insert; the unique
  // index on (source, key) decides, so concurrent posts of one key store one
  // event. A key older than the window is released.
  function ingestOne({ event: e, runs, maxQueuedRuns, windowMs }: EncodedIngest, tally: Tally): Outcome {
    const [id, tenantId, sourceId, , , receiveTime, idempotencyKey] = e;
    const queued = runs.length ? (tally.get(tenantId) ?? queuedCount.get(tenantId)!) : 0;
    if (queued + runs.length > (maxQueuedRuns ?? Infinity)) return OVER_QUOTA;
    if (!insertEventRow(e)) {
      const existing = existingByKey.get(sourceId, idempotencyKey!);
      if (!existing) throw new Error("event insert conflicted on a key that does not exist");
      if (existing.receive_time > receiveTime - windowMs) return { duplicate: true, eventId: existing.id };
      forgetKey.run(existing.id);
      if (!insertEventRow(e)) throw new Error("event insert conflicted twice");
    }
    for (const r of runs) insertRun.run(r);
    if (runs.length) tally.set(tenantId, queued + runs.length);
    return { duplicate: false, eventId: id };
  }

  // The common case: the whole batch in one transaction, no savepoints. An
  // item that throws rolls the whole transaction back (nothing of the batch is
  // stored) and the batch is committed again by commitEach.
  const commitAll = raw.transaction((batch: EncodedIngest[]) => {
    const tally: Tally = new Map();
    return batch.map((item): PlainOutcome => {
      try {
        return { ok: true, result: ingestOne(item, tally) };
      } catch (error) {
        throw new ItemFailed(error);
      }
    });
  });
  // Each item in its own savepoint: one bad item fails alone, the batch
  // commits. The item's own tally, merged once its savepoint is released, so
  // a rolled-back item's runs are not counted.
  const ingestItem = raw.transaction((item: EncodedIngest, tally: Tally) => ingestOne(item, tally));
  const commitEach = raw.transaction((batch: EncodedIngest[]) => {
    const tally: Tally = new Map();
    return batch.map((item): PlainOutcome => {
      const mine: Tally = new Map(tally);
      try {
        const result = ingestItem(item, mine);
        for (const [tenantId, n] of mine) tally.set(tenantId, n);
        return { ok: true, result };
      } catch (error) {
        return { ok: false, error: plainError(error) };
      }
    });
  });

  // Immediate: the write lock from BEGIN, so the quota's count and the
  // inserts see one state of the database.
  return (batch) => {
    try {
      return commitAll.immediate(batch);
    } catch (err) {
      if (!(err instanceof ItemFailed)) throw err;
    }
    return commitEach.immediate(batch);
  };
}
