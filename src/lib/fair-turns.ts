// Turns on one thread, shared fairly between keys (tenants) by cost: the
// event loop serves callbacks in the order they became ready, so a tenant
// with many large requests in flight puts all of them ahead of another
// tenant's next one, at every step that request takes. A turn is taken
// before a request's costly synchronous work (parsing, validating, matching
// a webhook's event); one turn is granted per event-loop iteration, and the
// next goes to the key whose waiting turn starts earliest in virtual time
// (start-time fair queuing): a key's turns advance its virtual time by their
// cost, so a key that sent little is served next, and keys that both keep
// turns waiting share them in proportion to their cost (bytes, say), not
// their count. Debts last only while turns wait: once none does, every key
// starts level again.
interface Waiting {
  key: string;
  start: number;
  grant(): void;
  refuse(reason: unknown): void;
}

// Past this many keys remembered, those already level with the virtual
// time are forgotten.
const MAX_REMEMBERED = 10_000;

export class FairTurns {
  // Keys with turns waiting, each with its turns in order.
  readonly #keys = new Map<string, Waiting[]>();
  // Virtual time at which each key's last turn ends: one that sent a large
  // request just now, then waits for its answer, comes back behind others.
  readonly #finish = new Map<string, number>();
  // Virtual time: the start of the turn last granted.
  #virtual = 0;
  // The latest end of any turn taken: where every key starts once nothing waits.
  #horizon = 0;
  #scheduled = false;

  // Resolves when it is `key`'s turn; the caller's work up to its next wait
  // for anything else is that turn. `cost`: the work it stands for (at
  // least 1). Rejects with the signal's reason, and gives its place up, if
  // `signal` aborts first.
  turn(key: string, cost: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((grant, refuse) => {
      if (signal?.aborted) return refuse(signal.reason);
      if (!this.#keys.size) this.#level();
      const start = Math.max(this.#virtual, this.#finish.get(key) ?? 0);
      const finish = start + Math.max(cost, 1);
      this.#finish.set(key, finish);
      this.#horizon = Math.max(this.#horizon, finish);
      const waiting: Waiting = { key, start, grant, refuse };
      const queue = this.#keys.get(key);
      if (queue) queue.push(waiting);
      else this.#keys.set(key, [waiting]);
      if (signal) {
        const gone = () => this.#cancel(waiting, signal.reason);
        signal.addEventListener("abort", gone, { once: true });
        waiting.grant = () => {
          signal.removeEventListener("abort", gone);
          grant();
        };
      }
      this.#schedule();
    });
  }

  // Turns waiting now (for metrics and tests).
  get waiting(): number {
    let n = 0;
    for (const queue of this.#keys.values()) n += queue.length;
    return n;
  }

  // Nothing waits: every key starts from the latest end taken.
  #level(): void {
    this.#virtual = this.#horizon;
    if (this.#finish.size > MAX_REMEMBERED) this.#finish.clear();
  }

  #cancel(waiting: Waiting, reason: unknown): void {
    const queue = this.#keys.get(waiting.key);
    const at = queue?.indexOf(waiting) ?? -1;
    if (at < 0) return;
    queue!.splice(at, 1);
    if (!queue!.length) this.#keys.delete(waiting.key);
    waiting.refuse(reason);
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    // An immediate runs after the iteration's I/O callbacks, and the granted
    // turn's continuation runs before the next immediate: one turn each
    // iteration, whatever else became ready in it.
    setImmediate(() => {
      this.#scheduled = false;
      this.#grantNext();
      if (this.#keys.size) this.#schedule();
    });
  }

  #grantNext(): void {
    let chosen: Waiting[] | undefined;
    for (const queue of this.#keys.values()) if (!chosen || queue[0]!.start < chosen[0]!.start) chosen = queue;
    if (!chosen) return;
    const next = chosen.shift()!;
    if (!chosen.length) this.#keys.delete(next.key);
    this.#virtual = next.start;
    next.grant();
  }
}
