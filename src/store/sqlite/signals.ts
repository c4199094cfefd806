import type Database from "better-sqlite3";
import { RUN_ENDED } from "../run-conditions.js";
import { SignalHub } from "../signal-hub.js";
import type { CachedTable } from "../store.js";

const CACHED: readonly CachedTable[] = ["webhook_sources", "triggers", "agents"];

// A cancelling process stamps end_time before it commits (and may wait for
// the write lock up to busy_timeout), so cancelled runs are looked for this
// far back; ids already signalled are remembered that long.
const CANCEL_LOOKBACK_MS = 10_000;

export interface SqliteSignalOptions {
  // How often PRAGMA data_version is read: how soon another process's commit
  // is seen.
  intervalMs?: number;
  now?: () => number;
}

// This process's writes on another connection (the writer thread's): a
// commit of theirs moves data_version before this thread has heard that it
// committed, and so before the signal its writer sends (../signalled.ts).
export interface OwnWrites {
  // Calls `fn` once every write in flight now has been answered here (at
  // once when none is).
  afterInFlight(fn: () => void): void;
}

// The store's signals on SQLite. This process's writes are signalled to it
// as they commit (../signalled.ts). Other processes' commits are seen by polling
// PRAGMA data_version, which changes on this connection only when another
// connection committed (one cheap read); then change_versions, bumped by
// triggers (migration 0005_change_signals), tells which tables changed and
// whether runs were cancelled; a cancelled run's id comes from the runs that
// ended as cancelled since the last look. Any such commit may have queued
// runs, changed runs or added events: workers and streams are woken at most
// once per poll, and a claim or a stream's look that finds nothing writes
// nothing.
export class SqliteSignals extends SignalHub {
  readonly #raw: Database.Database;
  readonly #now: () => number;
  readonly #dataVersion: Database.Statement<[], number>;
  readonly #versions = new Map<string, number>();
  readonly #signalledCancels = new Map<string, number>();
  #lastVersion: number;
  #cancelsSince: number;
  #timer?: NodeJS.Timeout;

  readonly #ownWrites?: OwnWrites;

  constructor(raw: Database.Database, options: SqliteSignalOptions = {}, ownWrites?: OwnWrites) {
    super();
    this.#raw = raw;
    this.#ownWrites = ownWrites;
    this.#now = options.now ?? Date.now;
    this.#dataVersion = raw.prepare<[], number>("pragma data_version").pluck(true);
    this.#lastVersion = this.#dataVersion.get()!;
    this.#cancelsSince = this.#now();
    try {
      this.#readVersions();
    } catch {
      // Not migrated (yet): the first poll that sees a commit drops everything.
    }
    this.#timer = setInterval(() => this.#poll(), options.intervalMs ?? 100);
    this.#timer.unref();
  }

  // Looks for other processes' commits (every intervalMs).
  #poll(): void {
    let version: number;
    try {
      version = this.#dataVersion.get()!;
    } catch {
      return; // closed: the store is shutting down
    }
    if (version === this.#lastVersion) return;
    this.#lastVersion = version;
    let changed: Set<string> | undefined;
    try {
      changed = this.#readVersions();
    } catch {
      // Not migrated yet, or unreadable: anything may have changed.
      this.changed(undefined);
    }
    // What it saw may be this process's own writes, whose signals (and the
    // "run queued" lines) come when their answers are handled: it signals
    // after those, so that a worker woken here does not start a run before
    // this process has said it was queued.
    if (this.#ownWrites) this.#ownWrites.afterInFlight(() => this.#signal(changed));
    else this.#signal(changed);
  }

  #signal(changed: Set<string> | undefined): void {
    if (changed) for (const table of CACHED) if (changed.has(table)) this.changed(table);
    this.runsQueued();
    // Which tenant's runs or events, if any, is not counted (a trigger per
    // inserted row would cost the ingest path): every stream looks once.
    this.runsChanged(undefined);
    this.eventsAdded(undefined);
    if (!changed?.has("runs_cancelled")) return;
    try {
      this.#cancelled();
    } catch {
      // Closed meanwhile (the signal waited for this process's writes).
    }
  }

  close(): void {
    clearInterval(this.#timer);
  }

  // Names whose version moved since the last read (all of them on the first).
  #readVersions(): Set<string> {
    const changed = new Set<string>();
    const rows = this.#raw.prepare<[], [string, number]>("select name, version from change_versions").raw(true).all();
    for (const [name, version] of rows) {
      if (this.#versions.get(name) !== version) changed.add(name);
      this.#versions.set(name, version);
    }
    return changed;
  }

  #cancelled(): void {
    const now = this.#now();
    const since = this.#cancelsSince - CANCEL_LOOKBACK_MS;
    this.#cancelsSince = now;
    // The ended statuses named too, in runs_end_time's words: SQLite takes a
    // partial index only for a query that states its condition, and without
    // it this read every run at each cancel.
    const ids = this.#raw
      .prepare<[number], string>(`select id from runs where end_time >= ? and status = 'cancelled' and ${RUN_ENDED}`)
      .pluck(true)
      .all(since);
    for (const [id, at] of this.#signalledCancels) if (at < since) this.#signalledCancels.delete(id);
    for (const id of ids) {
      if (this.#signalledCancels.has(id)) continue;
      this.#signalledCancels.set(id, now);
      this.runCancelled(id);
    }
  }
}
