// Turns on one thread, shared fairly between keys (tenants) by cost: the
// event loop serves callbacks in the order they became ready, so a tenant
// with many large requests in flight puts all of them ahead of another
// tenant's next one, at every step that request takes. A turn is taken
// before a request's costly synchronous work (parsing, validating, matching
// a webhook's event); turns are granted one after another, each once the
// last one's work up to its next wait for I/O is done, for up to
// ITERATION_BUDGET_MS of an event-loop iteration (then the loop takes in
// what arrived meanwhile), and the next goes to the key whose waiting turn
// starts earliest in virtual time
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

// How long one event-loop iteration grants turns. One turn per iteration
// capped a busy HTTP thread at its iterations per second, each of which
// polls the sockets (on a machine where system calls are dear, PostgreSQL
// ingestion acknowledged 2,375 of 2,500 events/s with p50 1.4 s; granting
// on within the iteration, all of them with p50 91 ms). A quiet tenant's
// request that arrives meanwhile waits this long at most, plus one turn.
const ITERATION_BUDGET_MS = 2;

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

  // `now`: the clock of ITERATION_BUDGET_MS (ms).
  constructor(private readonly now: () => number = () => performance.now()) {}

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
    // An immediate runs after the iteration's I/O callbacks: the turns of
    // requests that arrived in it are waiting by then.
    setImmediate(() => this.#grantWithin(this.now()));
  }

  // Grants the next turn, then the one after once this one's work is done:
  // a tick queued from a microtask runs once the microtask queue is empty,
  // that is once the granted turn's continuations (cached lookups, an inline
  // filter) ran up to their next wait for I/O. Past the budget, the next
  // iteration goes on.
  #grantWithin(began: number): void {
    this.#grantNext();
    if (!this.#keys.size) {
      this.#scheduled = false;
      return;
    }
    if (this.now() - began >= ITERATION_BUDGET_MS) {
      this.#scheduled = false;
      this.#schedule();
      return;
    }
    queueMicrotask(() => process.nextTick(() => this.#grantWithin(began)));
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
