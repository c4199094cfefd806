import { toBinary } from "@bufbuild/protobuf";
import { RunSchema } from "../../gen/platform/v1/run_pb.js";
import { changes } from "./change-feed.js";
import { notFound } from "./errors.js";
import { tenantOf, type PlatformStreamHandlers, type ServiceDeps } from "./handlers.js";
import { ENDED, STATUS_NAME, runMessage } from "./runs.js";
import type { Streams, Wake } from "./streams.js";

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && Buffer.compare(a, b) === 0;

// Streams of runs. Each subscribes to its tenant's run signals before it
// reads, so no change falls between a read and the subscription.
export function runStreamHandlers({ store, now }: ServiceDeps, streams: Streams) {
  return {
    // The run as it is, then again whenever what a client sees of it changes,
    // until it has ended.
    async *watchRun({ id }, call, signal) {
      const tenant = tenantOf(call);
      const session = streams.open(call, signal);
      try {
        session.hold(store.signals.onRunsChanged(tenant.id, session.wake));
        let last: Uint8Array | undefined;
        for (let wake: Wake = "poll"; wake !== "end"; wake = await session.next()) {
          const row = await store.runs.get(tenant.id, id);
          if (!row) {
            if (!last) throw notFound("run", id);
            return; // deleted since (retention)
          }
          const run = { ...runMessage(row), tenant: tenant.slug };
          const bytes = toBinary(RunSchema, run);
          if (!last || !sameBytes(bytes, last)) {
            last = bytes;
            yield { run };
            session.sent();
          }
          if (ENDED.has(row.status)) return;
        }
      } finally {
        session.release();
      }
    },
    // Every run of the tenant created or changed from now on that passes the
    // filters (as ListRuns), oldest change first.
    async *watchRuns(req, call, signal) {
      const tenant = tenantOf(call);
      const session = streams.open(call, signal);
      try {
        session.hold(store.signals.onRunsChanged(tenant.id, session.wake));
        // Subscribed: an empty first message tells the client so at once
        // (the response's headers go out with it), before any change.
        yield {};
        const where = {
          agentId: req.agentId || undefined,
          triggerId: req.triggerId || undefined,
          eventId: req.eventId || undefined,
          status: STATUS_NAME.get(req.status),
        };
        const feed = changes(
          {
            read: (from, limit) =>
              store.runs.list(tenant.id, { limit, where, after: { by: "updateTime", value: from.time, id: from.id } }),
            key: (row) => ({ time: row.updateTime, id: row.id }),
            version: (row) => `${row.id}@${row.updateTime}`,
            send: async (rows) => rows.map((row) => ({ run: { ...runMessage(row), tenant: tenant.slug } })),
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
