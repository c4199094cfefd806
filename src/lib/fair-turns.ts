// Turns on one thread, shared fairly between keys (tenants) by cost: the
// event loop serves callbacks in the order they became ready, so a tenant
// with many large requests in flight puts all of them ahead of another
// tenant's next one, at every step that request takes. A turn is taken
// before a request's costly synchronous work (parsing, validating, matching
// a webhook's event); one turn is granted per event-loop iteration, and the
// next goes to the key whose waiting request started earliest in virtual
// time (start-time fair queuing): a key's requests advance its virtual
// time by their cost, so a key that sent little is served next, and keys
// that both keep requests waiting share turns in proportion to their cost
// (bytes, say), not their count.
interface Waiting {
  start: number;
  grant(): void;
}

// Keys whose virtual time is behind by more than this many keys are forgotten.
const MAX_REMEMBERED = 10_000;

export class FairTurns {
  // Keys with turns waiting, each with its turns in order.
  readonly #keys = new Map<string, Waiting[]>();
  // Virtual time at which each key's last turn ends: one that sent a large
  // request just now, then waits for its answer, comes back behind others.
  readonly #finish = new Map<string, number>();
  // Virtual time: the start of the turn last granted.
  #virtual = 0;
  #scheduled = false;

  // Resolves when it is `key`'s turn; the caller's work up to its next wait
  // for anything else is that turn.
  turn(key: string, cost: number): Promise<void> {
    return new Promise<void>((grant) => {
      const start = Math.max(this.#virtual, this.#finish.get(key) ?? 0);
      this.#finish.set(key, start + Math.max(cost, 1));
      const waiting = this.#keys.get(key);
      if (waiting) waiting.push({ start, grant });
      else this.#keys.set(key, [{ start, grant }]);
      this.#schedule();
    });
  }

  // Turns waiting now (for metrics and tests).
  get waiting(): number {
    let n = 0;
    for (const waiting of this.#keys.values()) n += waiting.length;
    return n;
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
    let chosen: [string, Waiting[]] | undefined;
    for (const entry of this.#keys) if (!chosen || entry[1][0]!.start < chosen[1][0]!.start) chosen = entry;
    if (!chosen) return;
    const [key, waiting] = chosen;
    const next = waiting.shift()!;
    if (!waiting.length) this.#keys.delete(key);
    this.#virtual = next.start;
    if (this.#finish.size > MAX_REMEMBERED)
      for (const [k, finish] of this.#finish) if (finish <= this.#virtual && !this.#keys.has(k)) this.#finish.delete(k);
    next.grant();
  }
}
