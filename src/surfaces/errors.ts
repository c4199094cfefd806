import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJson } from "@connectrpc/connect/protocol-connect";

// Non-Connect surfaces answer errors in the Connect error JSON shape
// (`{"code": "not_found", "message": "…"}`) with the matching HTTP status.
export function httpError(err: unknown): { status: number; body: object } {
  const ce = err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal);
  return { status: codeToHttpStatus(ce.code), body: errorToJson(ce, undefined) };
}
