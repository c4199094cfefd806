import { Code, ConnectError } from "@connectrpc/connect";
import type { CallContext } from "./access.js";
import { tenantOf } from "./handlers.js";

// Bounds of the server streams (Watch…). A stream ends OK when it is idle or
// old; the client reconnects (and lists what it missed).
export interface StreamLimits {
  // Ends after this long without a message.
  idleMs: number;
  // Ends after this long in all, however busy.
  maxLifeMs: number;
  // Open streams per caller (subject) in one tenant.
  maxPerCaller: number;
  // Looks at the store this often without a signal: a lost signal only
  // delays.
  pollMs: number;
}

export const DEFAULT_STREAM_LIMITS: StreamLimits = {
  idleMs: 300_000,
  maxLifeMs: 3_600_000,
  maxPerCaller: 16,
  pollMs: 1000,
};

// Why a stream looks at the store again: a signal came, or the poll's time
// did; "end": it must end (idle, too old, caller gone, server closing).
export type Wake = "signal" | "poll" | "end";

// The streams open in this process: the per-caller cap, and the shutdown
// that ends them all.
export class Streams {
  readonly #limits: StreamLimits;
  readonly #now: () => number;
  readonly #perCaller = new Map<string, number>();
  readonly #closing = new AbortController();
  #open = 0;

  constructor(limits: StreamLimits, now: () => number = Date.now) {
    this.#limits = limits;
    this.#now = now;
  }

  // Streams open now.
  get count(): number {
    return this.#open;
  }

  // A stream for the authorized caller, ended when `signal` aborts (the
  // caller went away); resource_exhausted past the caller's cap. The caller
  // must release it.
  open(call: CallContext, signal: AbortSignal): StreamSession {
    if (this.#closing.signal.aborted) throw new ConnectError("the server is shutting down", Code.Unavailable);
    const tenant = tenantOf(call);
    const key = `${tenant.id}\0${call.principal.subject}`;
    const n = this.#perCaller.get(key) ?? 0;
    if (n >= this.#limits.maxPerCaller)
      throw new ConnectError(
        `too many open streams: at most ${this.#limits.maxPerCaller} per caller in tenant "${tenant.slug}"; close one first`,
        Code.ResourceExhausted,
      );
    this.#perCaller.set(key, n + 1);
    this.#open++;
    let released = false;
    return new StreamSession(this.#limits, this.#now, [signal, this.#closing.signal], () => {
      if (released) return;
      released = true;
      this.#open--;
      const left = this.#perCaller.get(key)! - 1;
      if (left) this.#perCaller.set(key, left);
      else this.#perCaller.delete(key);
    });
  }

  // Ends every open stream (graceful shutdown: an open stream must not hold
  // the server's close), and refuses new ones.
  close(): void {
    this.#closing.abort();
  }
}

// The messages of `source`, which is closed (its `finally` blocks run, its
// session is released) as soon as `signal` aborts, even while its reader is
// away. Ending at the next `session.next()` is not enough: a generator that
// has yielded only resumes when its reader asks again, and Connect's reader
// (connect-node 2.1.2) may never do so. It waits for each write's callback or
// 'drain'; Node's ServerResponse drops a write made after its socket is
// destroyed but before it closes itself, with neither, and then emits
// 'close', not 'error'. The caller's slot would stay taken until the idle end.
export async function* closedOnAbort<T>(source: AsyncGenerator<T>, signal: AbortSignal): AsyncGenerator<T> {
  // Queued behind a look at the store in progress (then the session's own
  // abort ends the loop); nobody is left to tell of an error in the finally.
  const close = () => void source.return(undefined).catch(() => {});
  if (signal.aborted) close();
  signal.addEventListener("abort", close);
  try {
    yield* source;
  } finally {
    signal.removeEventListener("abort", close);
  }
}

// One open stream: when to look at the store again, when to end.
export class StreamSession {
  readonly #limits: StreamLimits;
  readonly #now: () => number;
  readonly #onRelease: () => void;
  readonly #opened: number;
  readonly #cleanups: (() => void)[] = [];
  #lastMessage: number;
  #pending = false;
  #ended = false;
  #resolve?: (wake: Wake) => void;

  constructor(limits: StreamLimits, now: () => number, signals: AbortSignal[], onRelease: () => void) {
    this.#limits = limits;
    this.#now = now;
    this.#onRelease = onRelease;
    this.#opened = this.#lastMessage = now();
    const onAbort = () => this.#end();
    for (const s of signals) {
      s.addEventListener("abort", onAbort);
      this.#cleanups.push(() => s.removeEventListener("abort", onAbort));
    }
    if (signals.some((s) => s.aborted)) this.#ended = true;
  }

  get ended(): boolean {
    return this.#ended;
  }

  // Keeps an unsubscribe to call on release (a store signal's listener).
  hold(unsubscribe: () => void): void {
    this.#cleanups.push(unsubscribe);
  }

  // Something changed: look again (now, or as soon as the current look ends).
  wake = (): void => {
    if (this.#resolve) this.#resolve("signal");
    else this.#pending = true;
  };

  // A message went out: the idle time starts again.
  sent(): void {
    this.#lastMessage = this.#now();
  }

  // Waits for a signal, the next poll, or the end.
  next(): Promise<Wake> {
    if (this.#ended) return Promise.resolve("end");
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve("signal");
    }
    const now = this.#now();
    const endAt = Math.min(this.#lastMessage + this.#limits.idleMs, this.#opened + this.#limits.maxLifeMs);
    if (now >= endAt) return Promise.resolve(this.#end());
    return new Promise<Wake>((resolve) => {
      const pollAt = now + this.#limits.pollMs;
      const timer = setTimeout(() => {
        if (pollAt < endAt) this.#resolve?.("poll");
        else this.#end();
      }, Math.min(pollAt, endAt) - now);
      this.#resolve = (wake) => {
        clearTimeout(timer);
        this.#resolve = undefined;
        resolve(wake);
      };
    });
  }

  // Frees the caller's slot and every listener; idempotent.
  release(): void {
    this.#end();
    for (const cleanup of this.#cleanups.splice(0)) cleanup();
    this.#onRelease();
  }

  #end(): "end" {
    this.#ended = true;
    this.#resolve?.("end");
    return "end";
  }
}
