import { StoreUnavailableError } from "../errors.js";

// Failures that mean "the database cannot serve now" rather than a bad
// request: the driver's own connection errors, the socket's, and the server's
// SQLSTATE classes 08 (connection), 53 (insufficient resources) and 57P
// (shutting down, starting up).
const DRIVER_CODES = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

export function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && (DRIVER_CODES.has(code) || /^(08|53|57P)/.test(code));
}

// Runs a query, turning an unavailable database into StoreUnavailableError.
export async function pgRun<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw isUnavailable(err) ? new StoreUnavailableError((err as Error).message) : err;
  }
}
