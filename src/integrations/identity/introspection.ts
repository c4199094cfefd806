import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import { NO_OBSERVER, type Observer } from "../../lib/observer.js";
import { fetchRetryingReset } from "../outbound/retry-reset.js";
import { ConcurrencyGate, GateBusy } from "./concurrency-gate.js";
import { classifyErrorAnswer, oauthErrorOf, principalFromAnswer, readBounded, unauthenticated, unavailable } from "./introspection-answer.js";
import type { Authenticator, Principal } from "./principal.js";
import { TokenCache } from "./token-cache.js";

export interface IntrospectionOptions {
  url: string;
  // HTTP Basic caller credentials (RFC 7662 §2.1), or a bearer API key.
  clientId?: string;
  clientSecret?: string;
  bearer?: string;
  // When set, `aud` must contain it or `mcpResource` (then the token is
  // good on the MCP endpoint only).
  audience?: string;
  mcpResource?: string;
  cacheTtlSeconds: number;
  // How long a refusal (inactive, expired, not for us) is reused; 0 never.
  negativeCacheTtlSeconds?: number;
  // Entries per cache (accepted and refused tokens are kept apart, so a flood
  // of random tokens cannot evict the valid ones).
  cacheMaxEntries?: number;
  timeoutMs: number;
  // Leeway for `nbf`.
  clockToleranceSeconds?: number;
  // Introspection requests in flight at once, and how many more may wait
  // (each at most `timeoutMs`); beyond that callers get `unavailable` at once.
  maxConcurrent?: number;
  maxQueued?: number;
  // Where problems only the operator can fix (credentials, URL) are reported.
  log?: Pick<Logger, "error">;
  // Told of introspection requests and cache look-ups (metrics).
  observer?: Observer;
}

export const INTROSPECTION_DEFAULTS = {
  negativeCacheTtlSeconds: 10,
  cacheMaxEntries: 10_000,
  clockToleranceSeconds: 60,
  maxConcurrent: 32,
  maxQueued: 256,
} as const;

export interface IntrospectionAuthenticator extends Authenticator {
  // How many introspection requests were sent (metrics, tests).
  readonly lookups: number;
}

// The same operator problem is logged at most this often, so a flood of
// requests under a broken configuration does not flood the log.
const OPERATOR_LOG_INTERVAL_MS = 60_000;

// RFC 6749 §2.3.1: Basic credentials are form-urlencoded before base64.
const formEncode = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");

export function createIntrospectionAuthenticator(options: IntrospectionOptions): IntrospectionAuthenticator {
  const D = INTROSPECTION_DEFAULTS;
  const rules = { audience: options.audience, mcpResource: options.mcpResource, clockToleranceSeconds: options.clockToleranceSeconds ?? D.clockToleranceSeconds };
  const negativeTtlMs = (options.negativeCacheTtlSeconds ?? D.negativeCacheTtlSeconds) * 1000;
  const accepted = new TokenCache<Principal>(options.cacheMaxEntries ?? D.cacheMaxEntries);
  const refused = new TokenCache<string>(options.cacheMaxEntries ?? D.cacheMaxEntries);
  const inflight = new Map<string, Promise<Principal>>();
  const gate = new ConcurrencyGate(options.maxConcurrent ?? D.maxConcurrent, options.maxQueued ?? D.maxQueued, options.timeoutMs);
  const lastLogged = new Map<number, number>();
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    accept: "application/json",
  };
  if (options.clientId !== undefined && options.clientSecret !== undefined)
    headers.authorization =
      "Basic " + Buffer.from(`${formEncode(options.clientId)}:${formEncode(options.clientSecret)}`).toString("base64");
  else if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`;
  let lookups = 0;
  const observer = options.observer ?? NO_OBSERVER;

  function reportToOperator(status: number, message: string): void {
    const now = Date.now();
    if (now - (lastLogged.get(status) ?? -Infinity) < OPERATOR_LOG_INTERVAL_MS) return;
    lastLogged.set(status, now);
    options.log?.error(
      { status, introspectionUrl: options.url },
      `${message}: the identity provider refuses this service's introspection requests; check the introspection URL and credentials`,
    );
  }

  async function introspect(token: string): Promise<Principal> {
    lookups++;
    try {
      // Read-only, so a request lost to a reused socket's reset is sent again.
      const res = await fetchRetryingReset(fetch, options.url, {
        method: "POST",
        headers,
        body: new URLSearchParams({ token, token_type_hint: "access_token" }),
        // A redirect would resend the token to wherever the IdP points.
        redirect: "manual",
        signal: AbortSignal.timeout(options.timeoutMs),
      });
      if (res.status === 200) {
        const principal = principalFromAnswer(await readBounded(res), rules);
        observer.introspection("active");
        return principal;
      }
      const answer = classifyErrorAnswer(res.status, oauthErrorOf(await readBounded(res).catch(() => "")));
      if (answer.kind === "refused") throw unauthenticated(answer.message);
      if (answer.kind === "misconfigured") reportToOperator(res.status, answer.message);
      throw unavailable(answer.message);
    } catch (err) {
      const refusal = err instanceof ConnectError ? err : unavailable(`token introspection failed: ${(err as Error).message}`);
      observer.introspection(refusal.code === Code.Unauthenticated ? "inactive" : "error");
      throw refusal;
    }
  }

  // One look-up per distinct token, through the gate; its outcome is cached.
  async function lookup(key: string, token: string): Promise<Principal> {
    try {
      const principal = await gate.run(() => introspect(token));
      const ttlDeadline = Date.now() + options.cacheTtlSeconds * 1000;
      accepted.set(key, principal, Math.min(principal.expiresAt ?? ttlDeadline, ttlDeadline));
      return principal;
    } catch (err) {
      if (err instanceof GateBusy) throw unavailable(`token introspection is busy (${err.message}); try again shortly`);
      if (err instanceof ConnectError && err.code === Code.Unauthenticated)
        refused.set(key, err.rawMessage, Date.now() + negativeTtlMs);
      throw err;
    }
  }

  return {
    get lookups() {
      return lookups;
    },
    authenticate(token) {
      // Keyed by digest so the caches never hold a usable token.
      const key = createHash("sha256").update(token).digest("base64url");
      const principal = accepted.get(key);
      const refusal = principal ? undefined : refused.get(key);
      observer.tokenCache(principal || refusal !== undefined ? "hit" : "miss");
      if (principal) return Promise.resolve(principal);
      if (refusal !== undefined) return Promise.reject(unauthenticated(refusal));
      let pending = inflight.get(key);
      if (!pending) {
        pending = lookup(key, token).finally(() => inflight.delete(key));
        inflight.set(key, pending);
      }
      return pending;
    },
  };
}
