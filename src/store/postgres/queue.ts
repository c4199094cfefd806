// Placeholder: the PostgreSQL run queue lands from its own branch.
import type { Sql } from "./open.js";
import type { SignalHub } from "../signal-hub.js";
import type { RunQueue } from "../store.js";

export function createPgRunQueue(_sql: Sql, _signals: SignalHub): RunQueue {
  const missing = () => Promise.reject(new Error("not implemented"));
  return {
    claim: missing,
    heartbeat: missing,
    recordSteps: missing,
    finish: missing,
    release: missing,
    cancel: missing,
    nextLeaseExpiry: missing,
    insertMany: missing,
  };
}
