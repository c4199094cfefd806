import type { CachedTable, StoreSignals } from "./store.js";

// The listeners of a store's signals; each engine feeds it from its own
// source of changes (its own writes, and what other processes did).
export class SignalHub implements StoreSignals {
  readonly #runsQueued = new Set<() => void>();
  readonly #changed = new Set<(table: CachedTable | undefined) => void>();
  readonly #cancelled = new Set<(runId: string) => void>();

  onRunsQueued(listener: () => void): () => void {
    return subscribe(this.#runsQueued, listener);
  }
  onChanged(listener: (table: CachedTable | undefined) => void): () => void {
    return subscribe(this.#changed, listener);
  }
  onRunCancelled(listener: (runId: string) => void): () => void {
    return subscribe(this.#cancelled, listener);
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
}

function subscribe<L>(set: Set<L>, listener: L): () => void {
  set.add(listener);
  return () => void set.delete(listener);
}
