import { CHANNELS } from "./channels.js";
import type { Sql } from "./open.js";

// Tells every replica's streams (through LISTEN) whose runs changed and
// whose events arrived, after the writes commit. Not NOTIFY inside the
// writing transactions: a transaction that notifies holds PostgreSQL's
// global notification lock from its commit record to the end of its commit,
// so every notifying writer commits one after another (measured with table
// triggers: small concurrent run updates fell from ~900 to ~250 per second).
// Instead one statement of its own carries the tenants gathered while the
// previous one ran: one round trip at a time, whatever the write rate.
// Best effort: a notification lost (error, crash between commit and send)
// only waits for the streams' poll.
export class ChangeNotifier {
  readonly #sql: Sql;
  readonly #runs = new Set<string>();
  readonly #events = new Set<string>();
  #sending?: Promise<void>;

  constructor(sql: Sql) {
    this.#sql = sql;
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
      while (this.#runs.size || this.#events.size) {
        const runs = [...this.#runs];
        const events = [...this.#events];
        this.#runs.clear();
        this.#events.clear();
        await this.#sql`
          select pg_notify(${CHANNELS.runsChanged}, t) from unnest(${runs}::text[]) t
          union all
          select pg_notify(${CHANNELS.eventsAdded}, t) from unnest(${events}::text[]) t`.catch(() => {});
      }
      this.#sending = undefined;
    })();
  }
}
