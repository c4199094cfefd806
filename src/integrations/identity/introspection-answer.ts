// How an RFC 7662 answer becomes a principal or a refusal. Two kinds of
// errors come out of here: `unauthenticated` (the token is not good here; may
// be cached briefly) and `unavailable` (the IdP could not give a usable
// answer; never cached, never "allowed").
import { Code, ConnectError } from "@connectrpc/connect";
import { readBounded as readBoundedBody } from "../outbound/read-bounded.js";
import { isMcpOnly, principalFromClaims, type Principal } from "./principal.js";

// An introspection answer is a few hundred bytes; anything near this is not one.
const MAX_ANSWER_BYTES = 64 * 1024;

export const unavailable = (message: string) => new ConnectError(message, Code.Unavailable);
export const unauthenticated = (message: string) => new ConnectError(message, Code.Unauthenticated);

// Reads the body, failing as soon as it passes `limit` bytes.
export async function readBounded(res: Response, limit = MAX_ANSWER_BYTES): Promise<string> {
  const text = await readBoundedBody(res, limit);
  if (text === undefined) throw unavailable(`token introspection answer exceeds ${limit} bytes`);
  return text;
}

export interface AnswerRules {
  // When set, `aud` (a string or an array) must contain it.
  audience?: string;
  // Also accepted, on the MCP endpoint only (with `audience` set).
  mcpResource?: string;
  clockToleranceSeconds: number;
}

// RFC 7662 §2.2: `exp`, `iat`, `nbf` are NumericDate numbers (RFC 7519 §2
// allows fractions); anything else makes the whole answer unusable.
const TIMESTAMP_CLAIMS = ["exp", "iat", "nbf"] as const;
// Hydra says `token_use`, RFC 7662 `token_type`, Keycloak `typ`; any of them
// naming a refresh token refuses it (some IdPs answer `active: true` for those).
const TOKEN_KIND_CLAIMS = ["token_use", "token_type", "typ"] as const;

export function principalFromAnswer(text: string, rules: AnswerRules, now = Date.now()): Principal {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw unavailable("token introspection answered with a body that is not JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw unavailable("token introspection answered with JSON that is not an object");
  const claims = body as Record<string, unknown>;
  // Only the JSON literal `true` is active: not "true", not 1.
  if (claims.active !== true) throw unauthenticated("token is not active");
  for (const name of TIMESTAMP_CLAIMS) {
    const value = claims[name];
    if (value !== undefined && (typeof value !== "number" || !Number.isFinite(value)))
      throw unauthenticated(`token claim "${name}" must be a NumericDate number, got ${JSON.stringify(value)}`);
  }
  for (const name of TOKEN_KIND_CLAIMS) {
    const kind = claims[name];
    if (typeof kind === "string" && /refresh/i.test(kind)) throw unauthenticated("a refresh token is not an access token");
  }
  const expiresAt = typeof claims.exp === "number" ? claims.exp * 1000 : undefined;
  // The IdP already judged `exp`; ours is a backstop, so no tolerance here.
  if (expiresAt !== undefined && expiresAt <= now) throw unauthenticated("token has expired");
  if (typeof claims.nbf === "number" && claims.nbf * 1000 > now + rules.clockToleranceSeconds * 1000)
    throw unauthenticated(`token claim "nbf" is in the future: not valid before ${new Date(claims.nbf * 1000).toISOString()}`);
  if (rules.audience !== undefined) {
    const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    if (!aud.includes(rules.audience) && !(rules.mcpResource !== undefined && aud.includes(rules.mcpResource)))
      throw unauthenticated(`token audience does not include ${rules.audience}`);
    return principalFromClaims(claims, expiresAt, isMcpOnly(claims.aud, rules.audience, rules.mcpResource));
  }
  return principalFromClaims(claims, expiresAt);
}

// What a non-200 answer means. `refused`: about the token (RFC 7662 §2.3 and
// RFC 7009 §2.2.1: a 400 such as `unsupported_token_type` or
// `invalid_request` means the IdP will not vouch for it). `misconfigured`:
// the IdP refuses this service (its credentials, URL or request), which the
// caller cannot fix. `failed`: the IdP is down, overloaded or slow.
export type ErrorAnswer = { kind: "refused" | "misconfigured" | "failed"; message: string };

const CLIENT_ERRORS = new Set(["invalid_client", "unauthorized_client"]);
// Only the token varies between our requests, so "too large" is about it.
const TOO_LARGE = new Set([413, 414, 431]);

export function classifyErrorAnswer(status: number, oauthError: string | undefined): ErrorAnswer {
  const http = `token introspection answered HTTP ${status}`;
  if (status >= 300 && status < 400)
    return { kind: "misconfigured", message: `${http}, a redirect, which is not followed: configure the endpoint's final URL` };
  if (status === 400 && !(oauthError && CLIENT_ERRORS.has(oauthError)))
    return { kind: "refused", message: `the identity provider refused to introspect the token (${oauthError ?? http})` };
  if (TOO_LARGE.has(status)) return { kind: "refused", message: `the identity provider refused the token as too large (HTTP ${status})` };
  if (status === 408 || status === 429 || status >= 500) return { kind: "failed", message: http };
  return { kind: "misconfigured", message: oauthError ? `${http} (${oauthError})` : http };
}

// The OAuth `error` code of an error answer, if it has one.
export function oauthErrorOf(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as unknown;
    const error = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
    return typeof error === "string" && /^[\x20-\x7e]{1,64}$/.test(error) ? error : undefined;
  } catch {
    return undefined;
  }
}
