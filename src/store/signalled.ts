import type { CachedTable, RunQueue, ScheduleStore, Store, TenantRepo, WebhookStore } from "./store.js";

// Where the signals of this process's writes go, after they commit. SQLite:
// straight to this process's hub (other processes see the file change, see
// sqlite/signals.ts). PostgreSQL: NOTIFY after the commit, which every
// replica's LISTEN hears, this one's included (see postgres/signals.ts).
export interface SignalSink {
  runsQueued(): void;
  changed(table: CachedTable): void;
  runCancelled(runId: string): void;
  // `undefined`: some tenant's, not known.
  runsChanged(tenantId: string | undefined): void;
  eventsAdded(tenantId: string): void;
}

// Which writes signal what, for both engines, in one place: a store whose
// writes tell `sink` once they committed. Writes of a cached table whose
// patch touches only `quiet` columns (diagnostics no cache holds) are not
// signalled. SQL triggers signal only what a second process must learn and
// this wrapper cannot see: a cached table written by any writer (PostgreSQL
// triggers NOTIFY; SQLite's bump change_versions), a cancellation on SQLite.
export function signalled(store: Store, sink: SignalSink): Store {
  return {
    ...store,
    agents: signalledRepo(store.agents, "agents", sink),
    // Written by matching when a filter fails; no cache holds them.
    triggers: signalledRepo(store.triggers, "triggers", sink, ["filterError", "filterErrorTime"]),
    webhookSources: signalledRepo(store.webhookSources, "webhook_sources", sink),
    webhooks: signalledWebhooks(store.webhooks, sink),
    queue: signalledQueue(store.queue, sink),
    schedules: signalledSchedules(store.schedules, sink),
  };
}

function signalledRepo<Row, Insert>(repo: TenantRepo<Row, Insert>, table: CachedTable, sink: SignalSink, quiet: readonly (keyof Insert)[] = []): TenantRepo<Row, Insert> {
  const changed = <T>(result: T): T => {
    sink.changed(table);
    return result;
  };
  return {
    ...repo,
    insert: (row) => repo.insert(row).then(changed),
    insertWithin: (row, limit) => repo.insertWithin(row, limit).then((r) => (r === undefined ? r : changed(r))),
    update: (tenantId, id, patch) =>
      repo
        .update(tenantId, id, patch)
        .then((r) => (r === undefined || (Object.keys(patch) as (keyof Insert)[]).every((k) => quiet.includes(k)) ? r : changed(r))),
    delete: (tenantId, id) => repo.delete(tenantId, id).then((deleted) => (deleted ? changed(deleted) : deleted)),
  };
}

function signalledWebhooks(webhooks: WebhookStore, sink: SignalSink): WebhookStore {
  return {
    ...webhooks,
    ingest: (item, windowMs) =>
      webhooks.ingest(item, windowMs).then((result) => {
        if (result.duplicate) return result;
        sink.eventsAdded(item.event.tenantId);
        if (item.runs.length) {
          sink.runsQueued();
          sink.runsChanged(item.event.tenantId);
        }
        return result;
      }),
  };
}

function signalledSchedules(schedules: ScheduleStore, sink: SignalSink): ScheduleStore {
  return {
    ...schedules,
    fireSlot: (triggerId, slotTime, run, maxQueued) =>
      schedules.fireSlot(triggerId, slotTime, run, maxQueued).then((outcome) => {
        if (outcome === "fired") {
          sink.runsQueued();
          sink.runsChanged(run.tenantId);
        }
        return outcome;
      }),
  };
}

// A run's step records, finish and release name no tenant: the tenant of
// each run claimed through this queue is kept while it is held, so that only
// that tenant's streams wake (a run held by another queue, which this one
// never claimed, wakes every tenant's).
export function signalledQueue(queue: RunQueue, sink: SignalSink): RunQueue {
  const tenantOf = new Map<string, string>();
  return {
    ...queue,
    claim: (...args) =>
      queue.claim(...args).then((rows) => {
        for (const r of rows) tenantOf.set(r.id, r.tenantId);
        for (const tenantId of new Set(rows.map((r) => r.tenantId))) sink.runsChanged(tenantId);
        return rows;
      }),
    // A run no longer held (cancelled, taken over) is forgotten here too.
    heartbeat: (owner, ids, leaseMs, now) =>
      queue.heartbeat(owner, ids, leaseMs, now).then((held) => {
        for (const id of ids) if (!held.has(id)) tenantOf.delete(id);
        return held;
      }),
    recordSteps: (owner, id, steps, now) =>
      queue.recordSteps(owner, id, steps, now).then((held) => {
        if (held) sink.runsChanged(tenantOf.get(id));
        else tenantOf.delete(id);
        return held;
      }),
    finish: (owner, id, outcome, now) =>
      queue.finish(owner, id, outcome, now).then((held) => {
        if (held) sink.runsChanged(tenantOf.get(id));
        tenantOf.delete(id);
        return held;
      }),
    insertMany: (rows, maxQueued) =>
      queue.insertMany(rows, maxQueued).then((ok) => {
        if (ok && rows.length) {
          sink.runsQueued();
          sink.runsChanged(rows[0]!.tenantId);
        }
        return ok;
      }),
    release: (owner, ids, now) =>
      queue.release(owner, ids, now).then(() => {
        if (!ids.length) return;
        sink.runsQueued();
        for (const tenantId of new Set(ids.map((id) => tenantOf.get(id)))) sink.runsChanged(tenantId);
        for (const id of ids) tenantOf.delete(id);
      }),
    cancel: (tenantId, id, now) =>
      queue.cancel(tenantId, id, now).then((row) => {
        if (row) {
          sink.runCancelled(row.id);
          sink.runsChanged(tenantId);
        }
        return row;
      }),
  };
}
