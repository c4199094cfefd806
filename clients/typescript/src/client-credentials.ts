// OAuth 2.0 client credentials (RFC 6749 §4.4) for a service calling
// agentplane: one token at a time, replaced in the background shortly before
// it expires, so no call waits on the token endpoint once the first token is
// in, and none is sent with a token about to lapse in flight.

export interface TokenSource {
  // A bearer token valid for at least a little while longer.
  token(): Promise<string>;
  // The API refused this token (revoked, keys rotated): fetch a new one next.
  invalidate?(token: string): void;
}

export type ClientAuthMethod = "client_secret_basic" | "client_secret_post";

export interface ClientCredentialsOptions {
  clientId: string;
  clientSecret: string;
  // The token endpoint; without it, discovered from `issuer`'s metadata
  // (RFC 8414, then OpenID Connect discovery), as is the client
  // authentication method.
  tokenEndpoint?: string;
  issuer?: string;
  // Space-separated, e.g. "platform:read platform:write".
  scope?: string;
  // Sent as `audience` (Auth0, Ory Hydra: the API's address).
  audience?: string;
  // Sent as `resource` (RFC 8707).
  resource?: string;
  // Default: what the issuer's metadata supports, client_secret_basic first.
  authMethod?: ClientAuthMethod;
  // How long before expiry a token is replaced: 60 s by default, and never
  // more than half of a token's lifetime.
  refreshBeforeExpirySeconds?: number;
  fetch?: typeof fetch;
  // Milliseconds since the epoch; tests move it.
  now?: () => number;
}

interface Held {
  token: string;
  refreshAt: number;
  expiresAt: number;
}

interface Endpoint {
  url: string;
  authMethod: ClientAuthMethod;
}

export class ClientCredentials implements TokenSource {
  #held?: Held;
  #fetching?: Promise<Held>;
  #endpoint?: Promise<Endpoint>;
  readonly #fetch: typeof fetch;
  readonly #now: () => number;

  constructor(private readonly options: ClientCredentialsOptions) {
    if (!options.tokenEndpoint && !options.issuer) throw new Error("client credentials need a tokenEndpoint or an issuer to discover it from");
    this.#fetch = options.fetch ?? fetch;
    this.#now = options.now ?? Date.now;
  }

  async token(): Promise<string> {
    const held = this.#held;
    const now = this.#now();
    if (held && now < held.refreshAt) return held.token;
    const fetching = this.#refresh();
    if (held && now < held.expiresAt) {
      // Still good for a while: this call goes on with it while the new one
      // is fetched. Should that fail, a later call tries again, and once
      // the held token has expired the failure is that call's error.
      fetching.catch(() => {});
      return held.token;
    }
    return (await fetching).token;
  }

  invalidate(token: string): void {
    if (this.#held?.token === token) this.#held = undefined;
  }

  // Concurrent callers share one request.
  #refresh(): Promise<Held> {
    this.#fetching ??= this.#request()
      .then((held) => (this.#held = held))
      .finally(() => (this.#fetching = undefined));
    return this.#fetching;
  }

  async #request(): Promise<Held> {
    const { url, authMethod } = await this.#tokenEndpoint();
    const { clientId, clientSecret, scope, audience, resource } = this.options;
    const form = new URLSearchParams({ grant_type: "client_credentials" });
    if (scope) form.set("scope", scope);
    if (audience) form.set("audience", audience);
    if (resource) form.set("resource", resource);
    const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded", accept: "application/json" };
    if (authMethod === "client_secret_basic") {
      // RFC 6749 §2.3.1: each part form-encoded before base64.
      headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString("base64")}`;
    } else {
      form.set("client_id", clientId);
      form.set("client_secret", clientSecret);
    }
    const sentAt = this.#now();
    const res = await this.#fetch(url, { method: "POST", headers, body: form.toString() });
    const body = (await res.json().catch(() => ({}))) as { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown };
    if (!res.ok || typeof body.access_token !== "string") {
      const reason = typeof body.error === "string" ? `${body.error}${typeof body.error_description === "string" ? `: ${body.error_description}` : ""}` : "no access_token in the answer";
      throw new Error(`token request to ${url} failed (HTTP ${res.status}): ${reason}`);
    }
    // Counted from when the request was sent: the token may be that old.
    const expiresAt = sentAt + lifetimeSeconds(body.access_token, body.expires_in, sentAt) * 1000;
    const lifetime = expiresAt - sentAt;
    const early = Math.min((this.options.refreshBeforeExpirySeconds ?? 60) * 1000, lifetime / 2);
    return { token: body.access_token, expiresAt, refreshAt: expiresAt - early };
  }

  #tokenEndpoint(): Promise<Endpoint> {
    const { tokenEndpoint, issuer, authMethod } = this.options;
    if (tokenEndpoint) return Promise.resolve({ url: tokenEndpoint, authMethod: authMethod ?? "client_secret_basic" });
    // A failed discovery is tried again on the next call.
    this.#endpoint ??= discover(issuer!, this.#fetch).then(
      (metadata) => ({ url: metadata.token_endpoint, authMethod: authMethod ?? pickAuthMethod(metadata.token_endpoint_auth_methods_supported) }),
      (err: unknown) => {
        this.#endpoint = undefined;
        throw err;
      },
    );
    return this.#endpoint;
  }
}

// `expires_in` (RFC 6749 §5.1 recommends it), else a JWT's `exp`.
function lifetimeSeconds(token: string, expiresIn: unknown, sentAt: number): number {
  const seconds = typeof expiresIn === "string" ? Number(expiresIn) : expiresIn;
  if (typeof seconds === "number" && Number.isFinite(seconds) && seconds > 0) return seconds;
  const payload = token.split(".")[1];
  if (payload) {
    try {
      const { exp } = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { exp?: unknown };
      if (typeof exp === "number") return Math.max(0, exp - sentAt / 1000);
    } catch {
      // not a JWT: said below
    }
  }
  throw new Error("the token endpoint's answer says neither expires_in nor, in a JWT, exp: cannot tell when to refresh");
}

interface AuthorizationServerMetadata {
  issuer: string;
  token_endpoint: string;
  token_endpoint_auth_methods_supported?: string[];
}

// RFC 8414 §3 (the well-known path inserted before the issuer's path), then
// OpenID Connect Discovery (appended); the document must name the issuer it
// was fetched for (RFC 8414 §3.3).
async function discover(issuer: string, fetchImpl: typeof fetch): Promise<AuthorizationServerMetadata> {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/$/, "");
  const candidates = [`${url.origin}/.well-known/oauth-authorization-server${path}`, `${url.origin}${path}/.well-known/openid-configuration`];
  for (const candidate of candidates) {
    const res = await fetchImpl(candidate, { headers: { accept: "application/json" } });
    if (res.status === 404) continue;
    if (!res.ok) throw new Error(`authorization server metadata at ${candidate}: HTTP ${res.status}`);
    const metadata = (await res.json()) as Partial<AuthorizationServerMetadata>;
    if (metadata.issuer !== issuer) throw new Error(`authorization server metadata at ${candidate} is for issuer ${String(metadata.issuer)}, not ${issuer}`);
    if (typeof metadata.token_endpoint !== "string") throw new Error(`authorization server metadata at ${candidate} has no token_endpoint`);
    return metadata as AuthorizationServerMetadata;
  }
  throw new Error(`no authorization server metadata for issuer ${issuer} (tried ${candidates.join(", ")})`);
}

// RFC 8414 §2: client_secret_basic when the server does not say.
function pickAuthMethod(supported: string[] | undefined): ClientAuthMethod {
  if (!supported || supported.includes("client_secret_basic")) return "client_secret_basic";
  if (supported.includes("client_secret_post")) return "client_secret_post";
  throw new Error(`the token endpoint supports neither client_secret_basic nor client_secret_post (${supported.join(", ")})`);
}
