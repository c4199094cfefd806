import type { TokenRequestOutcome } from "../../lib/observer.js";
import type { FetchLike } from "../outbound/guarded-fetch.js";
import { clean, jsonReason } from "../outbound/upstream-reason.js";
import { SkillError } from "./errors.js";

export type TokenEndpointAuthMethod = "client_secret_basic" | "client_secret_post" | "private_key_jwt";

export interface OAuthSkillConfig {
  mcpUrl: string;
  issuer: string;
  clientId: string;
  clientSecret?: string;
  // The private_key_jwt key pair's private half (PKCS#8 PEM) and its JWK's kid.
  privateKey?: { pem: string; alg: "RS256" | "ES256"; kid: string };
  // Pinned by the skill; absent: chosen from the authorization server's metadata.
  tokenEndpointAuthMethod?: TokenEndpointAuthMethod;
  scopes: string[];
  audience: string;
}

export interface Challenge {
  resourceMetadata?: string;
  scope?: string;
  error?: string;
}

// Parses `WWW-Authenticate: Bearer k="v", k2="v2"` (RFC 6750 §3).
export function parseBearerChallenge(header: string | null): Challenge | undefined {
  if (!header || !/^Bearer\b/i.test(header)) return undefined;
  const params: Record<string, string> = {};
  for (const m of header.matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) params[m[1]!.toLowerCase()] = m[2]!.replace(/\\(.)/g, "$1");
  return { resourceMetadata: params.resource_metadata, scope: params.scope, error: params.error };
}

const EXPIRY_MARGIN_MS = 30_000;
const authFailed = (step: string, message: string) => new SkillError("skill_auth_failed", message, step);

async function getJson(fetch: FetchLike, url: string, timeoutMs: number, step: string): Promise<Record<string, unknown> | undefined> {
  let res: Response;
  try {
    res = await fetch(url, { headers: { accept: "application/json" }, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw authFailed(step, `GET ${clean(url)} failed: ${(err as Error).message}`);
  }
  if (res.status === 404) return undefined;
  if (!res.ok) throw authFailed(step, `GET ${clean(url)} answered HTTP ${res.status}`);
  try {
    return (await res.json()) as Record<string, unknown>;
  } catch {
    throw authFailed(step, `GET ${clean(url)} did not answer JSON`);
  }
}

// Both well-known forms for a URL with a path (RFC 9728 §3.1 inserts the
// well-known segment before the path; the seed names the appended form).
function wellKnownCandidates(base: string, suffix: string): string[] {
  const url = new URL(base);
  const path = url.pathname.replace(/\/$/, "");
  return [...new Set([`${url.origin}${path}/.well-known/${suffix}`, `${url.origin}/.well-known/${suffix}${path}`])];
}

const sameResource = (a: string, b: string) => a.replace(/\/$/, "") === b.replace(/\/$/, "");

// Client-credentials tokens for one OAuth skill: discovery as RFC 9728 and
// RFC 8414 describe, with the two checks that keep credentials from going
// anywhere else: the metadata must describe this skill's URL, and it must
// name the configured issuer as an authorization server.
export class OAuthSession {
  #token?: { value: string; until: number; scope: string };
  #tokenEndpoint?: string;

  constructor(
    private readonly config: OAuthSkillConfig,
    private readonly fetch: FetchLike,
    private readonly discoveryTimeoutMs: number,
    // Told of each token request as it ends.
    private readonly onTokenRequest: (outcome: TokenRequestOutcome) => void = () => {},
  ) {}

  cached(now = Date.now()): string | undefined {
    return this.#token && this.#token.until > now ? this.#token.value : undefined;
  }

  invalidate(): void {
    this.#token = undefined;
  }

  async authenticate(challenge: Challenge | undefined): Promise<string> {
    const metadata = await this.#protectedResourceMetadata(challenge?.resourceMetadata);
    const scopes = this.config.scopes.length
      ? this.config.scopes
      : challenge?.scope
        ? challenge.scope.split(" ")
        : Array.isArray(metadata.scopes_supported)
          ? (metadata.scopes_supported as string[])
          : [];
    const tokenEndpoint = (this.#tokenEndpoint ??= await this.#discoverTokenEndpoint());
    return this.#requestToken(tokenEndpoint, [...new Set(scopes)].join(" "));
  }

  // A 403 insufficient_scope may step up once: the challenge's scope is added.
  async stepUp(challenge: Challenge): Promise<string> {
    const current = this.#token?.scope.split(" ").filter(Boolean) ?? this.config.scopes;
    const wanted = [...new Set([...current, ...(challenge.scope?.split(" ") ?? [])])].join(" ");
    const tokenEndpoint = (this.#tokenEndpoint ??= await this.#discoverTokenEndpoint());
    return this.#requestToken(tokenEndpoint, wanted);
  }

  async #protectedResourceMetadata(fromChallenge: string | undefined): Promise<Record<string, unknown>> {
    const candidates = fromChallenge ? [fromChallenge] : wellKnownCandidates(this.config.mcpUrl, "oauth-protected-resource");
    let metadata: Record<string, unknown> | undefined;
    for (const url of candidates) if ((metadata = await getJson(this.fetch, url, this.discoveryTimeoutMs, "resource metadata"))) break;
    if (!metadata) throw authFailed("resource metadata", `no protected resource metadata at ${candidates.join(" or ")}`);
    if (typeof metadata.resource !== "string" || !sameResource(metadata.resource, this.config.mcpUrl))
      throw authFailed("resource metadata", `metadata is for resource "${clean(String(metadata.resource))}", not ${this.config.mcpUrl}`);
    const servers = Array.isArray(metadata.authorization_servers) ? (metadata.authorization_servers as unknown[]) : [];
    if (!servers.includes(this.config.issuer))
      throw authFailed(
        "resource metadata",
        `the server names authorization servers ${clean(JSON.stringify(servers))}, not the configured issuer ${this.config.issuer}; no credentials were sent`,
      );
    return metadata;
  }

  // RFC 8414 first (path-inserted, then appended), then OpenID discovery.
  async #discoverTokenEndpoint(): Promise<string> {
    const candidates = [
      ...wellKnownCandidates(this.config.issuer, "oauth-authorization-server"),
      ...wellKnownCandidates(this.config.issuer, "openid-configuration"),
    ];
    for (const url of candidates) {
      const doc = await getJson(this.fetch, url, this.discoveryTimeoutMs, "authorization server metadata");
      if (!doc) continue;
      if (doc.issuer !== this.config.issuer)
        throw authFailed("authorization server metadata", `${url} describes issuer "${clean(String(doc.issuer))}", not ${this.config.issuer}`);
      if (typeof doc.token_endpoint !== "string") throw authFailed("authorization server metadata", `${url} has no token_endpoint`);
      return doc.token_endpoint;
    }
    throw authFailed("authorization server metadata", `no metadata at ${candidates.join(", ")}`);
  }

  async #requestToken(endpoint: string, scope: string): Promise<string> {
    const form = new URLSearchParams({ grant_type: "client_credentials", resource: this.config.mcpUrl });
    if (scope) form.set("scope", scope);
    if (this.config.audience) form.set("audience", this.config.audience);
    const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");
    let res: Response;
    try {
      res = await this.fetch(endpoint, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          accept: "application/json",
          // Only ever the skill's own client credentials, only to its issuer's token endpoint.
          authorization: "Basic " + Buffer.from(`${enc(this.config.clientId)}:${enc(this.config.clientSecret ?? "")}`).toString("base64"),
        },
        body: form,
        signal: AbortSignal.timeout(this.discoveryTimeoutMs),
        // The client secret was sent to this endpoint only; its answer must
        // come from there too, never from wherever a redirect points.
        redirect: "error",
      });
    } catch (err) {
      this.onTokenRequest("failed");
      throw authFailed("token request", `POST ${clean(endpoint)} failed: ${(err as Error).message}`);
    }
    const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    this.onTokenRequest(res.ok && typeof body.access_token === "string" ? "ok" : "refused");
    if (!res.ok || typeof body.access_token !== "string") {
      const reason = jsonReason(body);
      throw authFailed("token request", `token endpoint answered HTTP ${res.status}${reason ? ` ${reason}` : ""}`);
    }
    const lifetime = typeof body.expires_in === "number" ? body.expires_in * 1000 : 300_000;
    this.#token = { value: body.access_token, until: Date.now() + lifetime - EXPIRY_MARGIN_MS, scope: typeof body.scope === "string" ? body.scope : scope };
    return body.access_token;
  }
}
