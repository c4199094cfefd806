import { setTimeout as sleep } from "node:timers/promises";
import type { SignalHub } from "../signal-hub.js";
import type { SignalSink } from "../signalled.js";
import type { CachedTable } from "../store.js";
import { CHANNELS } from "./channels.js";
import type { Sql } from "./open.js";

// Tells every replica (through LISTEN, this one's included) what this
// process's writes changed, after they commit. Not NOTIFY inside the writing
// transactions: a transaction that notifies holds PostgreSQL's global
// notification lock from its commit record to the end of its commit (its
// fsync included), so every notifying writer commits one after another
// (measured with table triggers: small concurrent run updates fell from ~900
// to ~250 per second; an ingest's wake-up held it through its group commit).
// Instead one statement of its own carries what was gathered while the
// previous one ran and for GAP_MS after it: at most one round trip per
// GAP_MS, whatever the write rate (back to back, they were a third of the
// HTTP thread's statements under load, one per ingest batch). Nothing
// waits on them in this process: its own workers are woken directly.
// Best effort: a notification lost (error, crash between commit and send)
// only waits for the streams' poll or the workers' idle poll.
const GAP_MS = 20;

export class ChangeNotifier implements SignalSink {
  readonly #sql: Sql;
  readonly #hub: SignalHub;
  readonly #runs = new Set<string>();
  readonly #events = new Set<string>();
  readonly #cancelled = new Set<string>();
  readonly #gap: () => Promise<void>;
  #queued = false;
  #sending?: Promise<void>;

  // `gap`: waits between statements (a test's gate instead of GAP_MS).
  constructor(sql: Sql, hub: SignalHub, gap = (): Promise<void> => sleep(GAP_MS)) {
    this.#sql = sql;
    this.#hub = hub;
    this.#gap = gap;
  }

  runsQueued(): void {
    this.#queued = true;
    this.#send();
  }

  // Cached tables' triggers notify, for every writer (another version, psql).
  changed(_table: CachedTable): void {}

  // Signalled here at once too, not only after the round trip through
  // LISTEN (aborting twice is harmless).
  runCancelled(runId: string): void {
    this.#hub.runCancelled(runId);
    this.#cancelled.add(runId);
    this.#send();
  }

  // `undefined`: some tenant's, not known here (sent as an empty payload).
  runsChanged(tenantId: string | undefined): void {
    this.#runs.add(tenantId ?? "");
    this.#send();
  }

  eventsAdded(tenantId: string): void {
    this.#events.add(tenantId);
    this.#send();
  }

  // Waits for what is being sent (store close).
  async flush(): Promise<void> {
    await this.#sending;
  }

  #send(): void {
    this.#sending ??= (async () => {
      // Lets the writes finishing in this turn join the first statement.
      await new Promise((resolve) => setImmediate(resolve));
      while (this.#runs.size || this.#events.size || this.#cancelled.size || this.#queued) {
        const runs = [...this.#runs];
        const events = [...this.#events];
        const cancelled = [...this.#cancelled];
        const queued = this.#queued;
        this.#runs.clear();
        this.#events.clear();
        this.#cancelled.clear();
        this.#queued = false;
        await this.#sql`
          select pg_notify(${CHANNELS.runsChanged}, t) from unnest(${runs}::text[]) t
          union all
          select pg_notify(${CHANNELS.eventsAdded}, t) from unnest(${events}::text[]) t
          union all
          select pg_notify(${CHANNELS.runCancelled}, t) from unnest(${cancelled}::text[]) t
          union all
          select pg_notify(${CHANNELS.runsQueued}, '') where ${queued}`.catch(() => {});
        await this.#gap();
      }
      this.#sending = undefined;
    })();
  }
}
