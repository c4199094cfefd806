import { CHANNELS } from "./channels.js";
import type { Sql } from "./open.js";
import type { SignalHub } from "../signal-hub.js";
import type { CachedTable } from "../store.js";

const CACHED: ReadonlySet<string> = new Set<CachedTable>(["webhook_sources", "triggers", "agents"]);

// Feeds the hub from NOTIFY, on one LISTEN connection of its own (postgres.js
// opens it beside the pool and listens again when it reconnects). Table
// triggers send `changed` for every writer; the others are sent after each
// commit by the store's change notifier, fed by ../signalled.ts, and heard
// here by every replica, this one included. Notifications sent while the connection was down are lost,
// so each channel, once listening again, reports that anything may have
// changed.
export async function listenSignals(sql: Sql, hub: SignalHub): Promise<void> {
  const relisten = (onReconnect: () => void) => {
    let first = true;
    return () => {
      if (first) first = false;
      else onReconnect();
    };
  };
  await Promise.all([
    sql.listen(CHANNELS.changed, (table) => hub.changed(CACHED.has(table) ? (table as CachedTable) : undefined), relisten(() => hub.changed(undefined))),
    sql.listen(CHANNELS.runsQueued, () => hub.runsQueued(), relisten(() => hub.runsQueued())),
    sql.listen(CHANNELS.runsChanged, (tenantId) => hub.runsChanged(tenantId || undefined), relisten(() => hub.runsChanged(undefined))),
    sql.listen(CHANNELS.eventsAdded, (tenantId) => hub.eventsAdded(tenantId || undefined), relisten(() => hub.eventsAdded(undefined))),
    // A cancellation missed while disconnected reaches its worker at the next heartbeat.
    sql.listen(CHANNELS.runCancelled, (runId) => hub.runCancelled(runId)),
  ]);
}
