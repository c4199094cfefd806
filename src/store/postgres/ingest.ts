import type { TransactionSql } from "postgres";
import { StoreUnavailableError } from "../errors.js";
import type { EventInsert, TriggerRow, WebhookSourceRow } from "../rows.js";
import { within } from "./deadline.js";
import { pg, toStoreError } from "./errors.js";
import type { Sql } from "./open.js";
import { tableReader } from "./repos.js";
import { holdCounts, holdQueuedCounts, insertRunRecords, queueRuns, runRecord } from "./runs.js";
import * as schema from "./schema.js";
import type { GroupCommitOptions } from "../group-commit.js";
import { batchedIngest, OVER_QUOTA, settle, settleEach, type ItemOutcome, type Outcome, type PendingIngest, type Tally } from "../ingest-batch.js";
import type { IngestResult, WebhookStore } from "../store.js";

// Events as records of a JSON array (see runs.ts), inserted unless the
// unique index on (source, idempotency key) holds the key already.
const EVENT_RECORD = `id text, tenant_id text, source_id text, event_type text, payload jsonb, receive_time bigint,
  idempotency_key text, matched_trigger_ids jsonb, create_time bigint, update_time bigint`;
const EVENT_COLUMNS = EVENT_RECORD.split(",").map((c) => c.trim().split(" ")[0]).join(", ");
const insertEvents = (where = "true") => `insert into events (${EVENT_COLUMNS})
  select * from json_to_recordset($1::json) as e(${EVENT_RECORD}) where ${where}
  on conflict (source_id, idempotency_key) where idempotency_key is not null do nothing returning id`;
const INSERT_EVENTS = insertEvents();

const eventRecord = (e: EventInsert) => ({
  id: e.id,
  tenant_id: e.tenantId,
  source_id: e.sourceId,
  event_type: e.eventType,
  payload: e.payload,
  receive_time: e.receiveTime,
  idempotency_key: e.idempotencyKey ?? null,
  matched_trigger_ids: e.matchedTriggerIds,
  create_time: e.createTime,
  update_time: e.updateTime,
});

// The common case in one statement, so one round trip and no BEGIN/COMMIT:
// the batch's events and the runs of those the unique index let in. The
// workers are woken after the commit by the store's signalled wrapper (a
// NOTIFY inside it would hold NOTIFY's global lock through the commit's
// fsync). It returns the ids inserted; an
// event missing from them met a stored key and is settled by ingestBatch
// (a duplicate, or a key older than its window to release).
const INSERT_ALL = `
  with ev as (${INSERT_EVENTS}),
  queued as (${insertRunRecords("$2", "r.event_id in (select id from ev)")} returning 1)
  select ev.id from ev`;

// INSERT_ALL for a batch whose runs count against their tenants' caps ($3:
// each capped tenant, the runs the batch adds for it, its cap; $4: every
// tenant the batch queues runs for), done only if every capped tenant's
// queued runs plus the batch's fit. One statement and no transaction: it
// holds the tenants' counts first (holdCounts, in ./runs.ts: the lock every
// writer of queued runs takes, and an exact `in` whatever its snapshot),
// then inserts. It returns the ids inserted, none when a capped tenant did
// not fit (the caller then admits item by item). Every tenant with runs is
// held, not only the capped ones, so that the runs trigger's
// upserts, after the statement, lock no row out of tenant order. A cap is
// int8: a quota may be configured past int4's range (a "no limit" of
// 10^12), and as int4 every such batch failed here and went item by item,
// with the same outcomes at under a quarter of the rate (bench/webhooks'
// tenants mode on PostgreSQL: 1,532 events/s for one tenant, 6,750 since).
const INSERT_ALL_WITHIN_CAPS = `
  with caps as (select * from json_to_recordset($3::json) as c(tenant_id text, adding int, cap int8)),
  ${holdCounts("$4")},
  counts as (select c.tenant_id, c.adding, c.cap, k.n from caps c join counted k on k.tenant_id = c.tenant_id),
  fits as (select coalesce(bool_and(n + adding <= cap), true) as ok from counts),
  ev as (${insertEvents("(select ok from fits)")}),
  queued as (${insertRunRecords("$2", "r.event_id in (select id from ev)")} returning 1)
  select ev.id from ev`;

// Inserts the events of a batch; the unique index on (source, key) decides
// duplicates, so concurrent posts of one key, on any replica, store one
// event. An event whose key is held by an event older than its window
// releases the key (set null on the old event) and is inserted. Then the runs
// of every inserted event, in one multi-row insert.
async function ingestBatch(tx: TransactionSql, batch: PendingIngest[]): Promise<IngestResult[]> {
  const results: IngestResult[] = new Array<IngestResult>(batch.length);
  const inserted: number[] = [];
  let pending = batch.map((_, i) => i);
  // Each round settles every item but those whose key it released (or whose
  // conflicting event vanished meanwhile); the next round inserts those.
  for (let round = 0; pending.length; round++) {
    if (round === 3) throw new Error("event insert kept conflicting on its idempotency key");
    const records = JSON.stringify(pending.map((i) => eventRecord(batch[i]!.write.item.event)));
    const ids = new Set((await tx.unsafe<{ id: string }[]>(INSERT_EVENTS, [records], { prepare: true })).map((r) => r.id));
    const conflicted: number[] = [];
    for (const i of pending) {
      const e = batch[i]!.write.item.event;
      if (ids.has(e.id)) {
        results[i] = { duplicate: false, eventId: e.id };
        inserted.push(i);
      } else conflicted.push(i);
    }
    if (!conflicted.length) break;
    const events = conflicted.map((i) => batch[i]!.write.item.event);
    const existing = new Map<string, { id: string; receiveTime: number }>();
    for (const row of await tx<{ id: string; sourceId: string; key: string; receiveTime: number }[]>`
        select id, source_id as "sourceId", idempotency_key as key, receive_time as "receiveTime" from events
        where source_id = any(${events.map((e) => e.sourceId)}) and idempotency_key = any(${events.map((e) => e.idempotencyKey!)})
          and idempotency_key is not null`)
      existing.set(`${row.sourceId}\n${row.key}`, row);
    pending = [];
    const release = new Set<string>();
    for (const i of conflicted) {
      const { item, windowMs } = batch[i]!.write;
      const e = item.event;
      const held = existing.get(`${e.sourceId}\n${e.idempotencyKey}`);
      if (held && held.receiveTime > e.receiveTime - windowMs) results[i] = { duplicate: true, eventId: held.id };
      else {
        if (held) release.add(held.id);
        pending.push(i);
      }
    }
    if (release.size) await tx`update events set idempotency_key = null where id = any(${[...release]})`;
  }
  await queueRuns(
    tx,
    inserted.flatMap((i) => batch[i]!.write.item.runs),
  );
  return results;
}

const capped = ({ write: { item } }: PendingIngest) => item.runs.length > 0 && (item.maxQueuedRuns ?? Infinity) !== Infinity;
// Every tenant the batch queues runs for, in order.
const queueingTenants = (batch: PendingIngest[]) => [...new Set(batch.filter((p) => p.write.item.runs.length).map((p) => p.write.item.event.tenantId))].sort();

// Each capped tenant of the batch: the runs the batch adds for it, and its
// cap (the least its items name).
function capsOf(batch: PendingIngest[]): Map<string, { adding: number; cap: number }> {
  const adding = new Map<string, { adding: number; cap: number }>();
  for (const { write: { item } } of batch.filter(capped)) {
    const t = adding.get(item.event.tenantId) ?? { adding: 0, cap: item.maxQueuedRuns! };
    t.adding += item.runs.length;
    t.cap = Math.min(t.cap, item.maxQueuedRuns!);
    adding.set(item.event.tenantId, t);
  }
  return adding;
}

// The items of a batch one by one within their tenants' caps, in the
// caller's transaction, holding the counts of every tenant they queue runs
// for: the items that fit are inserted or settled as duplicates
// (ingestBatch), the others are over quota. For a batch that did not fit,
// and for the items of a fitting one that met a stored key (a key released
// by its window inserts again, so it is counted again).
async function admitWithinCaps(tx: TransactionSql, batch: PendingIngest[]): Promise<Outcome[]> {
  const tally: Tally = await holdQueuedCounts(tx, queueingTenants(batch));
  const admitted = batch.filter((p) => reserve(p, tally));
  const results = new Map<PendingIngest, IngestResult>();
  if (admitted.length) for (const [i, r] of (await ingestBatch(tx, admitted)).entries()) results.set(admitted[i]!, r);
  return batch.map((p): Outcome => results.get(p) ?? OVER_QUOTA);
}

// Whether the item's runs fit its tenant's cap; if so they are counted. An
// item that turns out a duplicate keeps its count until the commit (the cap
// errs towards refusing).
function reserve({ write: { item } }: PendingIngest, tally: Tally): boolean {
  if (!item.runs.length) return true;
  const queued = tally.get(item.event.tenantId) ?? 0;
  if (queued + item.runs.length > (item.maxQueuedRuns ?? Infinity)) return false;
  tally.set(item.event.tenantId, queued + item.runs.length);
  return true;
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const byKey = ({ write: { item: { event: x } } }: PendingIngest, { write: { item: { event: y } } }: PendingIngest): number =>
  compare(x.sourceId, y.sourceId) || compare(x.idempotencyKey ?? "", y.idempotencyKey ?? "");

function isUnavailable(err: unknown): boolean {
  return toStoreError(err) instanceof StoreUnavailableError;
}

// `timeoutMs`: how long a lookup or a batch's statement may wait (see deadline.ts).
export function createPgWebhookStore(sql: Sql, options: GroupCommitOptions, timeoutMs: number): WebhookStore {
  const sources = tableReader(schema.webhookSources);
  const sourceByDigest = `${sources.select}
    where token_digest = $1 or (previous_token_digest = $1 and previous_token_expire_time > $2)`;
  const sourceById = `${sources.select} where id = $1`;
  // Columns the where clause pins are not read back: tenant_id and kind equal
  // the bound values, enabled is true.
  const candidates = `
    select t.id, t.agent_id as "agentId", t.source_id as "sourceId", t.event_type_pattern as "eventTypePattern", t.filter,
      t.cron, t.timezone, t.create_time as "createTime", t.update_time as "updateTime"
    from triggers t join agents a on a.id = t.agent_id
    where t.tenant_id = $1 and t.kind = 'webhook' and (t.source_id = $2 or t.source_id is null) and t.enabled and a.enabled`;
  type Candidate = Omit<TriggerRow, "tenantId" | "enabled" | "kind" | "filterError" | "filterErrorTime">;

  // The common case: the whole batch in one statement and no transaction
  // (INSERT_ALL; with capped runs INSERT_ALL_WITHIN_CAPS, which inserts only
  // if all fit). Then, in one transaction each (admitWithinCaps), a batch
  // that did not fit item by item within its caps, or the items that met a
  // stored key. An item error (a constraint,
  // bad data) rolls its statement back and the batch is committed again item
  // by item, each in a savepoint, so one bad item fails alone. An
  // unavailable database fails what is left of the batch (batchedIngest).
  async function commit(batch: PendingIngest[]) {
    // Every replica inserts keys in one order: two batches holding the same
    // keys then wait on each other's first shared key instead of each
    // holding one the other needs (a deadlock).
    batch.sort(byKey);
    try {
      const events = JSON.stringify(batch.map((p) => eventRecord(p.write.item.event)));
      const runs = JSON.stringify(batch.flatMap((p) => p.write.item.runs.map(runRecord)));
      const caps = capsOf(batch);
      const capsRecords = JSON.stringify([...caps].map(([tenant_id, t]) => ({ tenant_id, adding: t.adding, cap: t.cap })));
      const rows = await within(
        sql.unsafe<{ id: string }[]>(
          caps.size ? INSERT_ALL_WITHIN_CAPS : INSERT_ALL,
          caps.size ? [events, runs, capsRecords, queueingTenants(batch)] : [events, runs],
          { prepare: true },
        ),
        timeoutMs,
      );
      // None when a capped tenant did not fit.
      const inserted = new Set(rows.map((r) => r.id));
      for (const p of batch) if (inserted.has(p.write.item.event.id)) p.resolve({ duplicate: false, eventId: p.write.item.event.id });
      // What is left (a failure below sends it item by item).
      batch = batch.filter((p) => !inserted.has(p.write.item.event.id));
      if (!batch.length) return;
      const outcomes = await sql.begin((tx) => admitWithinCaps(tx, batch));
      batch.forEach((p, i) => settle(p, outcomes[i]!));
      return;
    } catch (err) {
      if (isUnavailable(err)) throw err;
    }
    const outcomes = await sql.begin(async (tx) => {
      const tally = await holdQueuedCounts(tx, queueingTenants(batch));
      const each: ItemOutcome[] = [];
      for (const p of batch) {
        // The item's runs count only once its savepoint is released.
        const mine: Tally = new Map(tally);
        if (!reserve(p, mine)) {
          each.push({ ok: true, result: OVER_QUOTA });
          continue;
        }
        try {
          const [result] = await tx.savepoint((sp) => ingestBatch(sp, [p]));
          for (const [tenantId, n] of mine) tally.set(tenantId, n);
          each.push({ ok: true, result: result! });
        } catch (error) {
          if (isUnavailable(error)) throw error;
          each.push({ ok: false, error });
        }
      }
      return each;
    });
    settleEach(batch, outcomes, toStoreError);
  }

  return {
    findSourceByTokenDigest: (digest, now) =>
      pg(async () => (await within(sql.unsafe<WebhookSourceRow[]>(sourceByDigest, [digest, now], { prepare: true }), timeoutMs))[0]),
    findSourceById: (id) => pg(async () => (await within(sql.unsafe<WebhookSourceRow[]>(sourceById, [id], { prepare: true }), timeoutMs))[0]),
    matchCandidates: (tenantId, sourceId) =>
      pg(async () =>
        (await within(sql.unsafe<Candidate[]>(candidates, [tenantId, sourceId], { prepare: true }), timeoutMs)).map(
          (t): TriggerRow => ({
            ...t,
            tenantId,
            enabled: true,
            kind: "webhook",
            // Diagnostics only; matching never reads them.
            filterError: null,
            filterErrorTime: null,
          }),
        ),
      ),
    ingest: batchedIngest(commit, options),
  };
}
