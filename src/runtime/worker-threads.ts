// Runs executed in worker threads, each with its own store connection and
// runtime, so that executing runs does not take the HTTP thread's time. The
// threads claim through the store like separate processes would; this side
// only passes on what the API did (runs queued, runs cancelled), restarts a
// thread that died, and stops them all on shutdown.
import { Worker as Thread } from "node:worker_threads";
import type { Logger } from "pino";
import type { Execution } from "./runtime.js";
import { DEFAULT_STOP_GRACE_MS } from "./worker.js";

// From the HTTP thread to a runtime thread.
export type ToThread = { type: "wake" } | { type: "cancel"; runId: string } | { type: "stop"; graceMs: number } | { type: "metrics"; id: number };

// From a runtime thread: it queued runs (schedule slots), a log line, or its
// metrics (prom-client JSON), answering a request.
export type FromThread = { type: "runsQueued" } | { type: "log"; line: string } | { type: "metrics"; id: number; snapshot: unknown };

export interface WorkerThreadsOptions {
  // The thread's module; it reads `data(index)` as its workerData.
  entry: URL;
  threads: number;
  data(index: number): unknown;
  log: Logger;
  // Writes a thread's log line, serialized and censored there, where this
  // thread's lines go: one writer, whole lines, the same format.
  writeLog?(line: string): void;
  // Wait before a thread that died is started again.
  restartDelayMs?: number;
}

// Beyond the grace given to in-flight runs, for the thread to release the
// rest and close its store.
const STOP_SLACK_MS = 5_000;
// A thread that keeps dying soon after its start is started again after a
// wait that doubles, up to this; one that lived this long counts afresh.
const MAX_RESTART_DELAY_MS = 30_000;
const HEALTHY_AFTER_MS = 60_000;
// A thread busy past this answers a scrape with its previous metrics.
const METRICS_WAIT_MS = 1_000;
// Last metrics of threads that exited, still counted (a restarted thread
// counts from zero); beyond this many the oldest are dropped.
const MAX_RETIRED = 32;

export class WorkerThreads implements Execution {
  readonly #o: WorkerThreadsOptions;
  readonly #threads: (Thread | undefined)[];
  readonly #exits = new Map<Thread, Promise<void>>();
  #stopping = false;
  #wakePending = false;
  readonly #asked = new Map<number, (snapshot: unknown) => void>();
  readonly #lastSnapshot = new Map<Thread, unknown>();
  readonly #retired: unknown[] = [];
  #nextAsk = 0;
  // Per thread index: deaths in a row, each soon after its start.
  readonly #quickDeaths: number[];

  constructor(options: WorkerThreadsOptions) {
    this.#o = options;
    this.#threads = new Array<Thread | undefined>(options.threads).fill(undefined);
    this.#quickDeaths = new Array<number>(options.threads).fill(0);
  }

  start(): void {
    for (let i = 0; i < this.#threads.length; i++) this.#spawn(i);
  }

  // Coalesced: one message per thread per event-loop turn, however many
  // ingests queued runs in it.
  wake(): void {
    if (this.#wakePending) return;
    this.#wakePending = true;
    setImmediate(() => {
      this.#wakePending = false;
      this.#post({ type: "wake" });
    });
  }

  // The run may execute on any thread; the others ignore it.
  cancel(runId: string): void {
    this.#post({ type: "cancel", runId });
  }

  async stop(graceMs = DEFAULT_STOP_GRACE_MS): Promise<void> {
    this.#stopping = true;
    this.#post({ type: "stop", graceMs });
    const exits = [...this.#exits.values()];
    const late = setTimeout(() => {
      for (const thread of this.#threads) void thread?.terminate();
    }, graceMs + STOP_SLACK_MS);
    await Promise.all(exits);
    clearTimeout(late);
  }

  // Every thread's metrics, asked for now; a thread that does not answer in
  // time is represented by what it answered before.
  async metricSnapshots(): Promise<unknown[]> {
    const live = this.#threads.filter((t): t is Thread => t !== undefined);
    const answers = await Promise.all(
      live.map(
        (thread) =>
          new Promise<unknown>((resolve) => {
            const id = ++this.#nextAsk;
            const late = setTimeout(() => {
              this.#asked.delete(id);
              resolve(this.#lastSnapshot.get(thread));
            }, METRICS_WAIT_MS);
            this.#asked.set(id, (snapshot) => {
              clearTimeout(late);
              this.#lastSnapshot.set(thread, snapshot);
              resolve(snapshot);
            });
            thread.postMessage({ type: "metrics", id } satisfies ToThread);
          }),
      ),
    );
    return [...this.#retired, ...answers.filter((a) => a !== undefined)];
  }

  #post(message: ToThread): void {
    for (const thread of this.#threads) thread?.postMessage(message);
  }

  #spawn(index: number): void {
    const { log } = this.#o;
    const thread = new Thread(this.#o.entry, { workerData: this.#o.data(index), name: `runtime-${index}` });
    const started = performance.now();
    this.#threads[index] = thread;
    thread.on("message", (message: FromThread) => {
      if (message.type === "runsQueued") this.wake();
      else if (message.type === "log") this.#o.writeLog?.(message.line);
      else {
        this.#asked.get(message.id)?.(message.snapshot);
        this.#asked.delete(message.id);
      }
    });
    thread.on("error", (err) => log.error({ err, thread: index }, "runtime thread failed"));
    this.#exits.set(
      thread,
      new Promise((resolve) =>
        thread.once("exit", (code) => {
          this.#exits.delete(thread);
          this.#threads[index] = undefined;
          const last = this.#lastSnapshot.get(thread);
          this.#lastSnapshot.delete(thread);
          if (last !== undefined && this.#retired.push(last) > MAX_RETIRED) this.#retired.shift();
          resolve();
          if (this.#stopping) return;
          // Its runs' leases expire and are claimed again, here or elsewhere.
          if (performance.now() - started >= HEALTHY_AFTER_MS) this.#quickDeaths[index] = 0;
          const quick = this.#quickDeaths[index]!++;
          const delayMs = Math.min(MAX_RESTART_DELAY_MS, (this.#o.restartDelayMs ?? 1000) * 2 ** quick);
          log.error({ thread: index, code, restartInMs: delayMs }, "runtime thread exited; starting it again");
          setTimeout(() => {
            if (!this.#stopping) this.#spawn(index);
          }, delayMs).unref();
        }),
      ),
    );
  }
}
