import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString, errorToJson } from "@connectrpc/connect/protocol-connect";
import { ANSWER_METADATA } from "../../service/errors.js";

// The one mapping from a service error and its metadata to HTTP, for every
// surface: Connect's status for the code, and the metadata that means an
// HTTP header (`Retry-After`) as that header. The Connect protocol applies
// the same status table and sends metadata as headers itself; the other
// surfaces answer through `errorAnswer`.
export interface ErrorAnswer {
  status: number;
  code: Code;
  // The code as Connect names it (`resource_exhausted`).
  name: string;
  // The error's own message; none of an internal error's.
  message: string;
  headers: Record<string, string>;
  // Not a service error: a bug or an outage, which the surface logs.
  unexpected: boolean;
}

// A service error as it is; anything else is `internal`, without its detail.
export const asServiceError = (err: unknown): ConnectError =>
  err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal);

export function errorAnswer(err: unknown): ErrorAnswer {
  const ce = asServiceError(err);
  const headers: Record<string, string> = {};
  for (const name of ANSWER_METADATA) {
    const value = ce.metadata.get(name);
    if (value) headers[name] = value;
  }
  return {
    status: codeToHttpStatus(ce.code),
    code: ce.code,
    name: codeToString(ce.code),
    message: ce.code === Code.Internal ? "internal error" : ce.rawMessage,
    headers,
    unexpected: !(err instanceof ConnectError) || ce.code === Code.Internal || ce.code === Code.Unknown,
  };
}

// REST and the root not-found handler answer in the Connect error JSON
// shape (`{"code": "not_found", "message": "…"}`).
export function httpError(err: unknown): { status: number; body: object; headers: Record<string, string>; unexpected: boolean } {
  const answer = errorAnswer(err);
  const body = errorToJson(new ConnectError(answer.message, answer.code), undefined);
  return { status: answer.status, body, headers: answer.headers, unexpected: answer.unexpected };
}

// Fastify's own refusals of a request body, before any handler runs, once
// for every surface; each answers them in its own shape and words.
export type BodyRefusal = { status: number; code: Code; kind: "too_large" | "media_type" | "length" | "empty" | "malformed"; message: string };

const BODY_REFUSALS: Record<string, Omit<BodyRefusal, "message">> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: Code.ResourceExhausted, kind: "too_large" },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, code: Code.InvalidArgument, kind: "media_type" },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: Code.InvalidArgument, kind: "length" },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: Code.InvalidArgument, kind: "empty" },
};

export function bodyRefusal(err: unknown): BodyRefusal | undefined {
  if (err instanceof ConnectError || !(err instanceof Error)) return undefined;
  const { code, statusCode } = err as { code?: string; statusCode?: number };
  const known = code === undefined ? undefined : BODY_REFUSALS[code];
  if (known) return { ...known, message: err.message };
  // Any other refusal of the request Fastify makes (bad JSON, …).
  if (statusCode !== undefined && statusCode >= 400 && statusCode < 500)
    return { status: statusCode, code: statusCode === 413 ? Code.ResourceExhausted : Code.InvalidArgument, kind: "malformed", message: err.message };
  return undefined;
}
