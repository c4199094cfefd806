import { create } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { EventSchema, type Event } from "../../gen/platform/v1/event_pb.js";
import { queuedRun } from "../store/queued-run.js";
import type { EventRow } from "../store/rows.js";
import { currentTraceParent } from "../lib/tracing.js";
import { notFound } from "./errors.js";
import { runMessage } from "./runs.js";
import { tenantOf, times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";
import { quotaError } from "./quotas.js";

export function eventMessage(row: EventRow, runIds: string[] = []): Event {
  return create(EventSchema, {
    id: row.id,
    sourceId: row.sourceId,
    eventType: row.eventType,
    payload: row.payload as Event["payload"],
    receiveTime: timestampFromMs(row.receiveTime),
    idempotencyKey: row.idempotencyKey ?? "",
    matchedTriggerIds: row.matchedTriggerIds,
    runIds,
    ...times(row),
  });
}

export function eventHandlers({ store, matcher, lookups, now, onRunsQueued, quotas }: ServiceDeps) {
  async function find(tenantId: string, id: string): Promise<EventRow> {
    const row = await store.events.get(tenantId, id);
    if (!row) throw notFound("event", id);
    return row;
  }

  return {
    async listEvents(req, call) {
      const tenant = tenantOf(call);
      const q = pageQuery(req);
      const rows = await store.events
        .list(tenant.id, {
          ...q,
          where: { sourceId: req.sourceId || undefined, eventType: req.eventType || undefined },
          receivedAfter: req.receiveTimeAfter && timestampMs(req.receiveTimeAfter),
          receivedBefore: req.receiveTimeBefore && timestampMs(req.receiveTimeBefore),
        });
      const { items, nextPageToken } = page(rows, q.limit);
      const runIds = await store.runs.idsForEvents(tenant.id, items.map((r) => r.id));
      return { events: items.map((r) => ({ ...eventMessage(r, runIds.get(r.id)), tenant: tenant.slug })), nextPageToken };
    },
    async getEvent({ id }, call) {
      const tenant = tenantOf(call);
      const row = await find(tenant.id, id);
      const runIds = await store.runs.idsForEvent(tenant.id, row.id);
      return { event: { ...eventMessage(row, runIds), tenant: tenant.slug } };
    },
    // Queues runs again for the triggers that match the event now (a trigger
    // added since, or one whose filter changed), as a new set of runs.
    async replayEvent({ id }, call) {
      const tenant = tenantOf(call);
      const event = await find(tenant.id, id);
      const triggers =
        lookups.cachedTriggers(tenant.id, event.sourceId) ?? (await lookups.loadTriggers(tenant.id, event.sourceId));
      const matched = await matcher.matching(tenant.id, triggers.matching(event.eventType), event.eventType, event.payload);
      const t = now();
      const traceParent = currentTraceParent();
      const rows = matched.map((m) => queuedRun({ tenantId: tenant.id, agentId: m.agentId, triggerId: m.id, eventId: event.id, traceParent }, t));
      if (!(await store.queue.insertMany(rows, quotas.queuedRuns)))
        throw quotaError(tenant.slug, quotas, "queuedRuns");
      if (rows.length) onRunsQueued("replay", rows);
      const runIds = await store.runs.idsForEvent(tenant.id, event.id);
      const runs = await Promise.all(rows.map((r) => store.runs.get(tenant.id, r.id)));
      return {
        event: { ...eventMessage(event, runIds), tenant: tenant.slug },
        runs: runs.filter((r) => r !== undefined).map((r) => ({ ...runMessage(r), tenant: tenant.slug })),
      };
    },
  } satisfies Partial<PlatformHandlers>;
}
