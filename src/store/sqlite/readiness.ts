import type Database from "better-sqlite3";
import { setTimeout as sleep } from "node:timers/promises";
import { StoreUnavailableError } from "../errors.js";
import { withLockWait } from "./lock-wait.js";

// Ready means able to take writes. In WAL mode a read answers while another
// process holds the write lock, and every webhook then answers 503, so
// readiness takes the write lock and gives it back. This process's own
// writers hold it for milliseconds at a time; another process's lock outlasts
// WAIT_MS. Each try is non-blocking, the waits between them on timers, so
// the event loop is never held.
const WAIT_MS = 500;
const TRY_MS = 5;

export async function probeWritable(raw: Database.Database): Promise<void> {
  const begin = raw.prepare("begin immediate");
  const rollback = raw.prepare("rollback");
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    // A transaction of this connection under way holds the lock already.
    const taken = raw.inTransaction || withLockWait(raw, 0, () => (begin.run(), rollback.run(), true));
    if (taken) return;
    if (Date.now() >= deadline) throw new StoreUnavailableError("the database is locked by another process");
    await sleep(TRY_MS);
  }
}
