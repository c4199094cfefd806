// The writer thread (writer.ts): its own connections, one message at a time,
// each answered once committed, or with why not.
import { parentPort, workerData } from "node:worker_threads";
import type Database from "better-sqlite3";
import { openConnection, type SqliteOptions } from "./connection.js";
import { UNAVAILABLE_CODES } from "./errors.js";
import { createIngestCommitter, plainError, type EncodedIngest, type PlainError, type PlainOutcome } from "./ingest-commit.js";
import type { RateLimitResult } from "../store.js";
import { createBucketTake, type TakeArgs } from "./rate-limits.js";

export type ToWriter = { id: number; batch: EncodedIngest[] } | { id: number; take: TakeArgs } | { close: true };
export type FromWriter = { id: number; outcomes: PlainOutcome[] } | { id: number; taken: RateLimitResult[] } | { id: number; failed: PlainError };

const port = parentPort!;
const options = workerData as SqliteOptions;

// Opened at first use, and afresh after a failure that says the database
// cannot serve (gone, read-only, locked past the wait), as a new process
// would open it.
function lazyConnection<T>(synchronous: SqliteOptions["synchronous"], prepare: (raw: Database.Database) => T) {
  let open: { raw: Database.Database; use: T } | undefined;
  return {
    get(): T {
      if (open) return open.use;
      const raw = openConnection({ path: options.path, synchronous });
      try {
        open = { raw, use: prepare(raw) };
      } catch (err) {
        raw.close();
        throw err;
      }
      return open.use;
    },
    drop(): void {
      try {
        open?.raw.close();
      } catch {
        // Closing a broken connection: it is gone either way.
      }
      open = undefined;
    },
  };
}

// Events are acknowledged once durable (the store's synchronous setting);
// rate-limit buckets need no fsync (rate-limits.ts).
const ingest = lazyConnection(options.synchronous, createIngestCommitter);
const buckets = lazyConnection("NORMAL", createBucketTake);

port.on("message", (message: ToWriter) => {
  if ("close" in message) {
    ingest.drop();
    buckets.drop();
    port.close();
    return;
  }
  const connection = "batch" in message ? ingest : buckets;
  let answer: FromWriter;
  try {
    answer = "batch" in message ? { id: message.id, outcomes: ingest.get()(message.batch) } : { id: message.id, taken: buckets.get()(...message.take) };
  } catch (err) {
    answer = { id: message.id, failed: plainError(err) };
    if (answer.failed.code === undefined || UNAVAILABLE_CODES.test(answer.failed.code)) connection.drop();
  }
  port.postMessage(answer);
});
