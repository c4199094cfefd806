import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJson } from "@connectrpc/connect/protocol-connect";

// Error metadata a service sets for its caller that means the same as an
// HTTP header: Connect sends it as one; the other surfaces copy it.
const ANSWER_HEADERS = ["retry-after"] as const;

// Non-Connect surfaces answer errors in the Connect error JSON shape
// (`{"code": "not_found", "message": "…"}`) with the matching HTTP status
// and the headers the error carries (`Retry-After` on a 429).
export function httpError(err: unknown): { status: number; body: object; headers: Record<string, string> } {
  const ce = err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal);
  const headers: Record<string, string> = {};
  for (const name of ANSWER_HEADERS) {
    const value = ce.metadata.get(name);
    if (value) headers[name] = value;
  }
  return { status: codeToHttpStatus(ce.code), body: errorToJson(ce, undefined), headers };
}
