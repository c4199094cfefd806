import type { TokenRequestOutcome } from "../../lib/observer.js";
import type { FetchLike } from "../outbound/guarded-fetch.js";
import { readBounded } from "../outbound/read-bounded.js";
import { fetchRetryingReset } from "../outbound/retry-reset.js";
import { clean, jsonReason } from "../outbound/upstream-reason.js";
import { chooseMethod, ClientAuthenticator, clientSecretRedactor, TOKEN_ENDPOINT_AUTH_METHODS, type ClientCredentials, type TokenEndpointAuthMethod } from "./client-auth.js";
import {
  authFailed,
  discoverAuthorizationServer,
  discoverResourceMetadata,
  MAX_DOCUMENT_BYTES,
  type AuthorizationServerMetadata,
  type ResourceMetadata,
} from "./oauth-discovery.js";

export { TOKEN_ENDPOINT_AUTH_METHODS, type TokenEndpointAuthMethod };

export interface OAuthSkillConfig extends ClientCredentials {
  mcpUrl: string;
  issuer: string;
  scopes: string[];
  audience: string;
}

export interface Challenge {
  resourceMetadata?: string;
  scope?: string;
  error?: string;
  errorDescription?: string;
}

// Parses `WWW-Authenticate: Bearer k="v", k2="v2"` (RFC 6750 §3).
export function parseBearerChallenge(header: string | null): Challenge | undefined {
  if (!header || !/^Bearer\b/i.test(header)) return undefined;
  const params: Record<string, string> = {};
  for (const m of header.matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) params[m[1]!.toLowerCase()] = m[2]!.replace(/\\(.)/g, "$1");
  return { resourceMetadata: params.resource_metadata, scope: params.scope, error: params.error, errorDescription: params.error_description };
}

const EXPIRY_MARGIN_MS = 30_000;

// A JSON object answer, or {} for anything else (too long, not JSON, not an
// object): the status then says what went wrong.
function parseObject(text: string | undefined): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text ?? "");
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // Below.
  }
  return {};
}

// Client-credentials tokens for one OAuth skill: discovery as the MCP
// authorization specification orders it (oauth-discovery.ts), client
// authentication as the authorization server advertises it (client-auth.ts).
export class OAuthSession {
  #token?: { value: string; until: number; scope: string };
  #resource?: ResourceMetadata;
  #server?: AuthorizationServerMetadata;
  readonly #client: ClientAuthenticator;
  // A token endpoint's reason may quote the secret it was sent; redacted
  // here, before the reason is cut to length (which could split it).
  readonly #redact: (text: string) => string;

  constructor(
    private readonly config: OAuthSkillConfig,
    private readonly fetch: FetchLike,
    private readonly discoveryTimeoutMs: number,
    // Told of each token request as it ends, with the method it used.
    private readonly onTokenRequest: (outcome: TokenRequestOutcome, method: TokenEndpointAuthMethod) => void = () => {},
  ) {
    this.#client = new ClientAuthenticator(config, config.issuer);
    this.#redact = clientSecretRedactor(config);
  }

  cached(now = Date.now()): string | undefined {
    return this.#token && this.#token.until > now ? this.#token.value : undefined;
  }

  invalidate(): void {
    this.#token = undefined;
  }

  async authenticate(challenge: Challenge | undefined): Promise<string> {
    const metadata = (this.#resource = await discoverResourceMetadata(
      this.fetch,
      this.config.mcpUrl,
      this.config.issuer,
      challenge?.resourceMetadata,
      this.discoveryTimeoutMs,
    ));
    const scopes = this.config.scopes.length ? this.config.scopes : challenge?.scope ? challenge.scope.split(" ") : metadata.scopesSupported;
    return this.#requestToken([...new Set(scopes)].join(" "));
  }

  // A 403 insufficient_scope may step up once: the challenge's scope is added.
  async stepUp(challenge: Challenge): Promise<string> {
    const current = this.#token?.scope.split(" ").filter(Boolean) ?? this.config.scopes;
    return this.#requestToken([...new Set([...current, ...(challenge.scope?.split(" ") ?? [])])].join(" "));
  }

  async #requestToken(scope: string): Promise<string> {
    this.#resource ??= await discoverResourceMetadata(this.fetch, this.config.mcpUrl, this.config.issuer, undefined, this.discoveryTimeoutMs);
    const { absent } = this.#resource;
    const legacy = absent && { mcpUrl: this.config.mcpUrl, absent };
    const server = (this.#server ??= await discoverAuthorizationServer(this.fetch, this.config.issuer, this.discoveryTimeoutMs, legacy));
    const choice = chooseMethod(this.config, server.authMethods);
    if ("refusal" in choice) throw authFailed("token request", choice.refusal);
    const { method } = choice;
    // RFC 8707: the resource the server's metadata names (the skill URL
    // without its query, or the origin it covers).
    const form = new URLSearchParams({ grant_type: "client_credentials", resource: this.#resource.resource });
    if (scope) form.set("scope", scope);
    if (this.config.audience) form.set("audience", this.config.audience);
    const headers = new Headers({ "content-type": "application/x-www-form-urlencoded", accept: "application/json" });
    // Only ever the skill's own client credentials, only to its issuer's token endpoint.
    await this.#client.apply(method, headers, form).catch((err: Error) => {
      throw authFailed("token request", `${method}: ${err.message}`);
    });
    const endpoint = server.tokenEndpoint;
    const unadvertised = choice.unadvertised
      ? `; the authorization server does not advertise ${method} (it lists ${clean(choice.unadvertised.join(", "))})`
      : "";
    let status: number;
    let body: Record<string, unknown>;
    try {
      // A second token is harmless, so a request lost to a reused socket's
      // reset is sent again (the form is a URLSearchParams: re-sendable).
      const res = await fetchRetryingReset(this.fetch, endpoint, {
        method: "POST",
        headers,
        body: form,
        signal: AbortSignal.timeout(this.discoveryTimeoutMs),
        // The credentials were sent to this endpoint only; its answer must
        // come from there too, never from wherever a redirect points.
        redirect: "error",
      });
      status = res.status;
      body = parseObject(await readBounded(res, MAX_DOCUMENT_BYTES));
    } catch (err) {
      this.onTokenRequest("failed", method);
      throw authFailed("token request", `POST ${clean(endpoint)} (${method}) failed: ${(err as Error).message}${unadvertised}`);
    }
    const token = typeof body.access_token === "string" ? body.access_token : undefined;
    const ok = status >= 200 && status < 300;
    this.onTokenRequest(ok && token ? "ok" : "refused", method);
    if (!ok || !token) {
      const reason = jsonReason(body, this.#redact) ?? (ok ? "without an access_token" : undefined);
      throw authFailed("token request", `POST ${clean(endpoint)} (${method}) answered HTTP ${status}${reason ? ` ${reason}` : ""}${unadvertised}`);
    }
    const lifetime = typeof body.expires_in === "number" ? body.expires_in * 1000 : 300_000;
    this.#token = { value: token, until: Date.now() + lifetime - EXPIRY_MARGIN_MS, scope: typeof body.scope === "string" ? body.scope : scope };
    return token;
  }
}
