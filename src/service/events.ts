import { create } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { EventSchema, type Event } from "../../gen/platform/v1/event_pb.js";
import type { EventRow } from "../store/schema.js";
import { fromStoreError, notFound } from "./errors.js";
import { tenantOf, times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";

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

export function eventHandlers({ store }: ServiceDeps) {
  async function find(tenantId: string, id: string): Promise<EventRow> {
    const row = await store.events.get(tenantId, id).catch(fromStoreError);
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
        })
        .catch(fromStoreError);
      const { items, nextPageToken } = page(rows, q.limit);
      return { events: items.map((r) => ({ ...eventMessage(r), tenant: tenant.slug })), nextPageToken };
    },
    async getEvent({ id }, call) {
      const tenant = tenantOf(call);
      const row = await find(tenant.id, id);
      const runIds = await store.runs.idsForEvent(tenant.id, row.id).catch(fromStoreError);
      return { event: { ...eventMessage(row, runIds), tenant: tenant.slug } };
    },
    async replayEvent({ id }, call) {
      await find(tenantOf(call).id, id);
      throw new ConnectError("replaying events is not available in this release yet", Code.Unimplemented);
    },
  } satisfies Partial<PlatformHandlers>;
}
