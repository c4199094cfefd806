import { idFloor, idTime } from "../lib/ids.js";
import { changes } from "./change-feed.js";
import { eventMessage } from "./events.js";
import { tenantOf, type PlatformStreamHandlers, type ServiceDeps } from "./handlers.js";
import type { Streams } from "./streams.js";

// Events never change once stored: the feed follows their ids, which sort by
// the time they were made (UUIDv7), over the index ListEvents uses.
export function eventStreamHandlers({ store, now }: ServiceDeps, streams: Streams) {
  return {
    // Every event of the tenant stored from now on that passes the filters
    // (as ListEvents), oldest first.
    async *watchEvents(req, call, signal) {
      const tenant = tenantOf(call);
      const session = streams.open(call, signal);
      try {
        session.hold(store.signals.onEventsAdded(tenant.id, session.wake));
        // Subscribed: an empty first message tells the client so at once
        // (the response's headers go out with it), before any change.
        yield {};
        const where = { sourceId: req.sourceId || undefined, eventType: req.eventType || undefined };
        const feed = changes(
          {
            read: (from, limit) =>
              store.events.list(tenant.id, { limit, where, after: { id: from.id || idFloor("evt", from.time) } }),
            key: (row) => ({ time: idTime(row.id), id: row.id }),
            version: (row) => row.id,
            // With the runs each queued, committed with it (as GetEvent
            // shows them), read for the page in one query.
            send: async (rows) => {
              const runIds = await store.runs.idsForEvents(tenant.id, rows.map((r) => r.id));
              return rows.map((row) => ({ event: { ...eventMessage(row, runIds.get(row.id)), tenant: tenant.slug } }));
            },
          },
          session,
          now(),
        );
        yield* feed;
      } finally {
        session.release();
      }
    },
  } satisfies Partial<PlatformStreamHandlers>;
}
