import type { CachedTable, StoreSignals } from "./store.js";

// The listeners of a store's signals; each engine feeds it from its own
// source of changes (its own writes, and what other processes did).
export class SignalHub implements StoreSignals {
  readonly #runsQueued = new Set<() => void>();
  readonly #changed = new Set<(table: CachedTable | undefined) => void>();
  readonly #cancelled = new Set<(runId: string) => void>();
  // Per tenant, so that a change wakes only that tenant's streams.
  readonly #runs = new TenantListeners();
  readonly #events = new TenantListeners();

  onRunsQueued(listener: () => void): () => void {
    return subscribe(this.#runsQueued, listener);
  }
  onChanged(listener: (table: CachedTable | undefined) => void): () => void {
    return subscribe(this.#changed, listener);
  }
  onRunCancelled(listener: (runId: string) => void): () => void {
    return subscribe(this.#cancelled, listener);
  }
  onRunsChanged(tenantId: string, listener: () => void): () => void {
    return this.#runs.add(tenantId, listener);
  }
  onEventsAdded(tenantId: string, listener: () => void): () => void {
    return this.#events.add(tenantId, listener);
  }
  tenantListeners(): number {
    return this.#runs.size + this.#events.size;
  }

  runsQueued(): void {
    for (const l of this.#runsQueued) l();
  }
  changed(table: CachedTable | undefined): void {
    for (const l of this.#changed) l(table);
  }
  runCancelled(runId: string): void {
    for (const l of this.#cancelled) l(runId);
  }
  // `undefined`: any tenant's (the store cannot tell which).
  runsChanged(tenantId: string | undefined): void {
    this.#runs.notify(tenantId);
  }
  eventsAdded(tenantId: string | undefined): void {
    this.#events.notify(tenantId);
  }
}

function subscribe<L>(set: Set<L>, listener: L): () => void {
  set.add(listener);
  return () => void set.delete(listener);
}

class TenantListeners {
  readonly #byTenant = new Map<string, Set<() => void>>();
  size = 0;

  add(tenantId: string, listener: () => void): () => void {
    let set = this.#byTenant.get(tenantId);
    if (!set) this.#byTenant.set(tenantId, (set = new Set()));
    const entry = () => listener(); // one entry per subscription, even of the same function
    set.add(entry);
    this.size++;
    return () => {
      if (!set.delete(entry)) return;
      this.size--;
      if (!set.size) this.#byTenant.delete(tenantId);
    };
  }

  notify(tenantId: string | undefined): void {
    if (tenantId === undefined) {
      for (const set of this.#byTenant.values()) for (const l of set) l();
      return;
    }
    const set = this.#byTenant.get(tenantId);
    if (set) for (const l of set) l();
  }
}
