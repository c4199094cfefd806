import { Code, ConnectError } from "@connectrpc/connect";
import { StoreConflictError, StoreReferenceError, StoreRefusedError, StoreUnavailableError } from "../store/errors.js";

// Error constructors with one wording per condition, so every surface shows
// the same message for the same mistake.
export const invalidArgument = (field: string, problem: string) =>
  new ConnectError(`${field}: ${problem}`, Code.InvalidArgument);

export const notFound = (kind: string, id: string) => new ConnectError(`${kind} "${id}" not found`, Code.NotFound);

export const failedPrecondition = (message: string) => new ConnectError(message, Code.FailedPrecondition);

export const permissionDenied = (message: string) => new ConnectError(message, Code.PermissionDenied);

// A per-tenant quota is reached: names the count, the limit and the variable
// that sets it, so the operator knows what to raise.
// Refused for now: the caller may try again after `seconds`. The metadata
// key is the HTTP header's name, as Connect sends metadata as headers and
// the other surfaces copy the `ANSWER_METADATA` (surfaces/http/errors.ts).
const RETRY_AFTER = "retry-after";
export const ANSWER_METADATA = [RETRY_AFTER] as const;
export const retryLater = (message: string, seconds: number, code = Code.ResourceExhausted) =>
  new ConnectError(message, code, { [RETRY_AFTER]: String(seconds) });

// An expression the sandbox could not evaluate for the machine's load
// (outcome `overloaded`): the service's fault, not the sender's, so a
// webhook is not acknowledged and its sender sends it again.
export const overloaded = (what: string) =>
  retryLater(`the service is overloaded: ${what} could not be evaluated in time; retry later`, 1, Code.Unavailable);

export const quotaExceeded = (tenant: string, limit: number, what: string, variable: string) =>
  new ConnectError(`tenant ${tenant} has ${limit} ${what}, the limit (${variable})`, Code.ResourceExhausted);

// Names are unique per tenant for agents, skills and webhook sources (a
// unique index in both engines): a write that would repeat one is refused
// naming the field, as a validation error names it. The conflict message for
// `insertWithinQuota` or `onConflict` on the write that stores the name.
export const nameTaken = (field: string, kind: string, name: string, tenant: { slug: string }) =>
  `${field}: ${kind} "${name}" already exists in tenant "${tenant.slug}"`;

// Store failures become API errors; anything unrecognised is rethrown as is
// (the surfaces turn it into `internal` without detail). Translated once,
// where the service is entered (`storeErrorsTranslated`), so no handler has
// to remember it.
export function fromStoreError(err: unknown): never {
  if (err instanceof StoreConflictError) throw new ConnectError("already exists", Code.AlreadyExists);
  if (err instanceof StoreReferenceError) throw failedPrecondition("a referenced record does not exist or is still in use");
  if (err instanceof StoreUnavailableError) throw new ConnectError("store unavailable", Code.Unavailable);
  // Input is checked before it gets here (validate.ts): this is a safety net, not a 500.
  if (err instanceof StoreRefusedError) throw new ConnectError("the store cannot keep a value of this request", Code.InvalidArgument);
  throw err;
}

// A conflict the handler words itself (which record exists already); every
// other store error is left to the entry point.
export const onConflict =
  (message: string) =>
  (err: unknown): never => {
    if (err instanceof StoreConflictError) throw new ConnectError(message, Code.AlreadyExists);
    throw err;
  };

// The service's entry points with store errors translated, thrown or
// rejected alike: `platform.ts` wraps its own, the webhook ingestion
// (`webhooks.ts`, `webhook-deliveries.ts`) the ones its surface calls.
export function storeErrorsTranslated<T extends object>(entries: T): T {
  const translated: Record<string, unknown> = {};
  for (const [name, entry] of Object.entries(entries)) {
    translated[name] =
      typeof entry !== "function"
        ? entry
        : (...args: unknown[]) => {
            try {
              const result: unknown = entry.apply(entries, args);
              return result instanceof Promise ? result.catch(fromStoreError) : result;
            } catch (err) {
              return fromStoreError(err);
            }
          };
  }
  return translated as T;
}
