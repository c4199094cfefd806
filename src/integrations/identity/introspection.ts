import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { principalFromClaims, type Authenticator, type Principal } from "./principal.js";
import { TokenCache } from "./token-cache.js";

export interface IntrospectionOptions {
  url: string;
  // HTTP Basic caller credentials (RFC 7662 §2.1), or a bearer API key.
  clientId?: string;
  clientSecret?: string;
  bearer?: string;
  // When set, `aud` must contain it.
  audience?: string;
  cacheTtlSeconds: number;
  timeoutMs: number;
}

export interface IntrospectionAuthenticator extends Authenticator {
  // How many introspection requests were sent (metrics, tests).
  readonly lookups: number;
}

const unavailable = (message: string) => new ConnectError(message, Code.Unavailable);
const unauthenticated = (message: string) => new ConnectError(message, Code.Unauthenticated);

// RFC 6749 §2.3.1: Basic credentials are form-urlencoded before base64.
const formEncode = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");

export function createIntrospectionAuthenticator(options: IntrospectionOptions): IntrospectionAuthenticator {
  const cache = new TokenCache();
  const inflight = new Map<string, Promise<Principal>>();
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    accept: "application/json",
  };
  if (options.clientId !== undefined && options.clientSecret !== undefined)
    headers.authorization =
      "Basic " + Buffer.from(`${formEncode(options.clientId)}:${formEncode(options.clientSecret)}`).toString("base64");
  else if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`;
  let lookups = 0;

  async function introspect(token: string): Promise<Principal> {
    lookups++;
    let res: Response;
    try {
      res = await fetch(options.url, {
        method: "POST",
        headers,
        body: new URLSearchParams({ token, token_type_hint: "access_token" }),
        signal: AbortSignal.timeout(options.timeoutMs),
      });
    } catch (err) {
      throw unavailable(`token introspection failed: ${(err as Error).message}`);
    }
    if (!res.ok) throw unavailable(`token introspection answered HTTP ${res.status}`);
    let body: Record<string, unknown>;
    try {
      body = (await res.json()) as Record<string, unknown>;
    } catch {
      throw unavailable("token introspection answered with a body that is not JSON");
    }
    if (body.active !== true) throw unauthenticated("token is not active");
    // Some providers answer `active: true` for refresh tokens too.
    const kind = [body.token_use, body.token_type].find((v) => typeof v === "string") as string | undefined;
    if (kind !== undefined && /refresh/i.test(kind)) throw unauthenticated("a refresh token is not an access token");
    const expiresAt = typeof body.exp === "number" ? body.exp * 1000 : undefined;
    if (expiresAt !== undefined && expiresAt <= Date.now()) throw unauthenticated("token has expired");
    if (options.audience !== undefined) {
      const aud = Array.isArray(body.aud) ? body.aud : [body.aud];
      if (!aud.includes(options.audience)) throw unauthenticated(`token audience does not include ${options.audience}`);
    }
    const principal = principalFromClaims(body, expiresAt);
    if (!principal) throw unauthenticated("token has neither sub nor client_id");
    return principal;
  }

  return {
    get lookups() {
      return lookups;
    },
    async authenticate(token) {
      // Keyed by digest so the cache never holds a usable token.
      const key = createHash("sha256").update(token).digest("base64url");
      const cached = cache.get(key);
      if (cached) return cached;
      let pending = inflight.get(key);
      if (!pending) {
        pending = introspect(token).finally(() => inflight.delete(key));
        inflight.set(key, pending);
        const principal = await pending;
        const ttlDeadline = Date.now() + options.cacheTtlSeconds * 1000;
        cache.set(key, principal, Math.min(principal.expiresAt ?? ttlDeadline, ttlDeadline));
        return principal;
      }
      return pending;
    },
  };
}
