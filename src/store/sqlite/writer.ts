// The HTTP thread's writes on a thread of their own: ingest's commits and the
// rate limits' buckets. better-sqlite3 is synchronous, so on the HTTP thread
// a commit's fsync (10-30 ms on an ordinary disk, far more on a shared one)
// and every wait for another connection's write lock held every request of
// every tenant. The writer thread owns its connections and writes one
// message at a time; the HTTP thread keeps serving meanwhile, the next
// ingest batch gathering behind the commit under way (group commit), and a
// request is answered only once the writer says its event is committed.
import { createHash } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { threadId, Worker } from "node:worker_threads";
import type * as Esbuild from "esbuild";
import { projectRoot } from "../../lib/project-root.js";
import { StoreUnavailableError } from "../errors.js";
import type { SqliteOptions } from "./connection.js";
import { toStoreError } from "./errors.js";
import { fromPlainError, type EncodedIngest, type PlainOutcome } from "./ingest-commit.js";
import type { RateLimitResult } from "../store.js";
import type { TakeArgs } from "./rate-limits.js";
import type { FromWriter, ToWriter } from "./writer-thread.js";

// A thread that does not finish its write and close within this is stopped.
const CLOSE_WAIT_MS = 10_000;

type Answer = FromWriter & { outcomes?: PlainOutcome[]; taken?: RateLimitResult[] };

interface Waiting {
  resolve(answer: Answer): void;
  reject(error: unknown): void;
}

// Compiled, the thread runs its .js module. From TypeScript (the test
// runner) there is none: the .ts module and the few of ours it imports are
// bundled into one ES module (esbuild, a development dependency), written
// under node_modules/.cache, where its imports of packages resolve as ours
// do. Loading it through tsx's loader hooks instead cost every thread a hooks
// thread of its own and about 1.3 s of CPU: 80 s of the test suite's.
function startThread(options: SqliteOptions): Worker {
  const compiled = new URL("./writer-thread.js", import.meta.url);
  return new Worker(existsSync(fileURLToPath(compiled)) ? compiled : (bundledFile ??= bundle()), { workerData: options });
}

// Bundled once per module instance: every store of a test file starts a thread.
let bundledFile: string | undefined;

function bundle(): string {
  const { buildSync } = createRequire(import.meta.url)("esbuild") as typeof Esbuild;
  const [output] = buildSync({
    entryPoints: [fileURLToPath(new URL("./writer-thread.ts", import.meta.url))],
    bundle: true,
    packages: "external",
    platform: "node",
    format: "esm",
    target: "node20",
    write: false,
    logLevel: "silent",
  }).outputFiles;
  const dir = join(projectRoot(), "node_modules", ".cache", "agentplane");
  const file = join(dir, `writer-thread-${createHash("sha256").update(output!.contents).digest("hex").slice(0, 16)}.mjs`);
  if (!existsSync(file)) {
    // Test workers start threads at once: each writes its own file, renamed into place.
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.${process.pid}.${threadId}`;
    writeFileSync(partial, output!.contents);
    renameSync(partial, file);
  }
  return file;
}

// Started at its first write: a runtime thread's store, which never ingests,
// never starts one.
export class WriterThread {
  readonly #options: SqliteOptions;
  #thread?: Worker;
  #closed = false;
  #nextId = 0;
  readonly #waiting = new Map<number, Waiting>();
  // Called once the writes up to `upTo` are answered (see afterInFlight).
  readonly #after: { upTo: number; fn: () => void }[] = [];

  constructor(options: SqliteOptions) {
    this.#options = { path: options.path, synchronous: options.synchronous ?? "FULL" };
  }

  // Each item's outcome once the batch is committed; rejects when the
  // commit failed (nothing of the batch stored) or the thread died with the
  // batch (then it may or may not be stored: its senders retry, and an
  // idempotency key finds the stored event).
  async commit(batch: EncodedIngest[]): Promise<PlainOutcome[]> {
    return (await this.#ask((id) => ({ id, batch }))).outcomes!;
  }

  async take(...take: TakeArgs): Promise<RateLimitResult[]> {
    return (await this.#ask((id) => ({ id, take }))).taken!;
  }

  // Writes are answered in order; `fn` runs after the answer to the last
  // one in flight now, once what that answer resolved has run (the
  // ingest's continuations, its "run queued" lines and signals).
  afterInFlight(fn: () => void): void {
    if (!this.#waiting.size) return fn();
    this.#after.push({ upTo: this.#nextId, fn });
  }

  async close(): Promise<void> {
    this.#closed = true;
    const thread = this.#thread;
    this.#thread = undefined;
    if (!thread) return;
    const exited = once(thread, "exit");
    thread.postMessage({ close: true } satisfies ToWriter);
    const timer = setTimeout(() => void thread.terminate(), CLOSE_WAIT_MS);
    await exited.finally(() => clearTimeout(timer));
  }

  #ask(message: (id: number) => ToWriter): Promise<Answer> {
    if (this.#closed) return Promise.reject(new StoreUnavailableError("the store is closed"));
    const thread = this.#thread ?? this.#start();
    const id = ++this.#nextId;
    return new Promise<Answer>((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      thread.postMessage(message(id));
    });
  }

  #answered(upTo: number): void {
    while (this.#after.length && this.#after[0]!.upTo <= upTo) setImmediate(this.#after.shift()!.fn);
  }

  #start(): Worker {
    const thread = startThread(this.#options);
    // Idle, it keeps no process alive; a write in flight is awaited by a
    // request, whose socket does.
    thread.unref();
    thread.on("message", (answer: Answer) => {
      const waiting = this.#waiting.get(answer.id);
      this.#waiting.delete(answer.id);
      // As the store's own calls fail (errors.ts): by the SQLite code.
      if ("failed" in answer) waiting?.reject(toStoreError(fromPlainError(answer.failed)));
      else waiting?.resolve(answer);
      this.#answered(answer.id);
    });
    const lost = (error: Error) => {
      // An error of the thread's own (not its answer's) is a fault of ours:
      // the write it held answers unavailable, and the next starts a thread.
      if (this.#thread === thread) this.#thread = undefined;
      for (const waiting of this.#waiting.values()) waiting.reject(error);
      this.#waiting.clear();
      this.#answered(Infinity);
    };
    thread.on("error", (err) => lost(new StoreUnavailableError(`the store's writer thread failed: ${err.message}`)));
    thread.on("exit", (code) => lost(new StoreUnavailableError(`the store's writer thread exited (code ${code})`)));
    this.#thread = thread;
    return thread;
  }
}
