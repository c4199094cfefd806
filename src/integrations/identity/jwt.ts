import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  createRemoteJWKSet,
  customFetch,
  errors,
  jwtVerify,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
  type JWTVerifyResult,
} from "jose";
import type { Logger } from "pino";
import { LogThrottle } from "../../lib/log-throttle.js";
import { NO_OBSERVER, type Observer } from "../../lib/observer.js";
import { isMcpOnly, principalFromClaims, type Authenticator, type Principal } from "./principal.js";
import { TokenCache } from "./token-cache.js";

export interface JwtOptions {
  issuer: string;
  audience: string;
  // Also accepted, on the MCP endpoint only: `<public url>/mcp`.
  mcpResource?: string;
  algorithms: string[];
  clockToleranceSeconds: number;
  // Explicit JWKS; else the issuer's discovery document's `jwks_uri`, else
  // `<issuer>/.well-known/jwks.json`.
  jwksUrl?: string;
  // A local key set (the dev issuer) instead of fetching one.
  keySet?: JWTVerifyGetKey;
  // How soon an unknown `kid` may trigger another JWKS fetch.
  jwksCooldownMs?: number;
  fetchTimeoutMs?: number;
  // Told of JWKS fetches and cache look-ups (metrics).
  observer?: Observer;
  // Told when tokens name another issuer or audience: a configuration only
  // the operator can fix, which the caller's 401 alone would not reveal.
  log?: Pick<Logger, "warn">;
}

// RFC 9068 access tokens say `at+jwt`; many IdPs (Auth0) say `JWT`.
const ACCEPTED_TYP = new Set(["jwt", "at+jwt", "application/at+jwt"]);

const unauthenticated = (message: string) => new ConnectError(message, Code.Unauthenticated);

export function createJwtAuthenticator(options: JwtOptions): Authenticator {
  const cache = new TokenCache<Principal>();
  let keySet: Promise<JWTVerifyGetKey> | undefined = options.keySet && Promise.resolve(options.keySet);
  const timeoutDuration = options.fetchTimeoutMs ?? 5000;
  const observer = options.observer ?? NO_OBSERVER;
  const mismatch = mismatchReporter(options);
  // jose's own fetch, counted.
  const jwksFetch = (url: string, init: RequestInit) =>
    fetch(url, init).then(
      (res) => (observer.jwksFetch(res.ok ? "ok" : "error"), res),
      (err: unknown) => {
        observer.jwksFetch("error");
        throw err;
      },
    );

  async function resolveKeySet(): Promise<JWTVerifyGetKey> {
    const url = options.jwksUrl ?? (await discoverJwksUrl(options.issuer, timeoutDuration));
    return createRemoteJWKSet(new URL(url), { cooldownDuration: options.jwksCooldownMs ?? 30_000, timeoutDuration, [customFetch]: jwksFetch });
  }

  async function verify(token: string): Promise<Principal> {
    keySet ??= resolveKeySet().catch((err: unknown) => {
      keySet = undefined; // try discovery again on the next request
      throw err;
    });
    const verifyOptions = {
      issuer: options.issuer,
      audience: options.mcpResource ? [options.audience, options.mcpResource] : options.audience,
      algorithms: options.algorithms,
      clockTolerance: options.clockToleranceSeconds,
      requiredClaims: ["exp"],
    };
    let result: JWTVerifyResult;
    try {
      result = await jwtVerify(token, await keySet, verifyOptions);
    } catch (err) {
      // A token without `kid` while the JWKS holds several keys of its
      // algorithm (rotation): jose leaves trying each candidate to us.
      if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw err;
      result = await verifyWithCandidates(token, err, verifyOptions);
    }
    const { typ } = result.protectedHeader;
    if (typ !== undefined && (typeof typ !== "string" || !ACCEPTED_TYP.has(typ.toLowerCase())))
      throw unauthenticated(`token type "${String(typ)}" is not an access token`);
    const { payload } = result;
    return principalFromClaims(payload, (payload.exp ?? 0) * 1000, isMcpOnly(payload.aud, options.audience, options.mcpResource));
  }

  return {
    async authenticate(token) {
      // Keyed by digest so the cache never holds a usable token.
      const key = createHash("sha256").update(token).digest("base64url");
      const cached = cache.get(key);
      observer.tokenCache(cached ? "hit" : "miss");
      if (cached) return cached;
      try {
        const principal = await verify(token);
        cache.set(key, principal, principal.expiresAt ?? 0);
        return principal;
      } catch (err) {
        mismatch(err);
        throw toConnectError(err);
      }
    },
  };
}

// The claim's value from the refused token, bounded: it is the sender's text.
const bounded = (value: unknown): unknown =>
  typeof value === "string" ? value.slice(0, 200) : Array.isArray(value) ? value.slice(0, 5).map(bounded) : typeof value;

// One warning a minute per claim (keyed by the claim, never by the sender's
// value, so random tokens cannot multiply the lines), naming what this server
// expects and what the token says.
function mismatchReporter(options: JwtOptions): (err: unknown) => void {
  const throttle = new LogThrottle(60_000);
  return (err) => {
    if (!options.log || !(err instanceof errors.JWTClaimValidationFailed) || (err.claim !== "iss" && err.claim !== "aud")) return;
    const suppressed = throttle.admit(err.claim);
    if (suppressed === undefined) return;
    const expected = err.claim === "iss" ? options.issuer : [options.audience, ...(options.mcpResource ? [options.mcpResource] : [])];
    options.log.warn(
      { claim: err.claim, expected, received: bounded(err.payload[err.claim]), suppressed },
      "access token refused: a claim does not match this server's configuration",
    );
  };
}

async function verifyWithCandidates(
  token: string,
  candidates: errors.JWKSMultipleMatchingKeys,
  verifyOptions: JWTVerifyOptions,
): Promise<JWTVerifyResult> {
  for await (const key of candidates) {
    try {
      return await jwtVerify(token, key, verifyOptions);
    } catch (err) {
      if (!(err instanceof errors.JWSSignatureVerificationFailed)) throw err;
    }
  }
  throw unauthenticated("token signature is invalid");
}

async function discoverJwksUrl(issuer: string, timeoutMs: number): Promise<string> {
  const base = issuer.replace(/\/+$/, "");
  try {
    const res = await fetch(`${base}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(timeoutMs) });
    if (res.ok) {
      const doc = (await res.json()) as { jwks_uri?: unknown; issuer?: unknown };
      if (typeof doc.jwks_uri === "string") return doc.jwks_uri;
    } else if (res.status >= 500) {
      throw new ConnectError(`identity provider discovery answered ${res.status}`, Code.Unavailable);
    }
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    throw new ConnectError(`identity provider discovery failed: ${(err as Error).message}`, Code.Unavailable);
  }
  return `${base}/.well-known/jwks.json`;
}

function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof errors.JWTExpired) return unauthenticated("token has expired");
  if (err instanceof errors.JWTClaimValidationFailed) return unauthenticated(`token claim "${err.claim}" is invalid: ${err.reason}`);
  if (err instanceof errors.JOSEAlgNotAllowed) return unauthenticated("token signing algorithm is not allowed");
  if (err instanceof errors.JWKSNoMatchingKey) return unauthenticated("token signing key is unknown");
  if (err instanceof errors.JWSSignatureVerificationFailed) return unauthenticated("token signature is invalid");
  if (err instanceof errors.JWKSTimeout) return new ConnectError("identity provider JWKS timed out", Code.Unavailable);
  if (err instanceof errors.JWKSInvalid) return new ConnectError("identity provider JWKS is unusable", Code.Unavailable);
  if (err instanceof errors.JOSEError && /JSON Web Key Set HTTP response/.test(err.message))
    return new ConnectError(`identity provider JWKS unavailable: ${err.message}`, Code.Unavailable);
  if (err instanceof errors.JOSEError) return unauthenticated("token is malformed or invalid");
  // Anything else is a failure to reach the JWKS, never a reason to allow.
  return new ConnectError(`identity provider unreachable: ${(err as Error).message}`, Code.Unavailable);
}
