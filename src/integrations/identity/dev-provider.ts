import { join } from "node:path";
import type { JWK } from "jose";
import Provider, { errors, type Client, type KoaContext } from "oidc-provider";
import { createDevAdapter, type Adapter } from "./dev-adapter.js";
import { API_SCOPES, CONSOLE_CLIENT_ID, CONSOLE_SCOPES, DEV_USER, MCP_SCOPES, REGISTRATION_LIMITS } from "./dev-login.js";

// The interactive half of the dev issuer: oidc-provider (a certified OpenID
// provider) does authorization code + PKCE, RFC 8414 metadata, RFC 7591
// registration, RFC 8707 resource indicators and refresh tokens, signing
// with the same key as the client_credentials tokens. The HTTP surface
// (surfaces/dev-issuer/dev-issuer.ts) mounts it and renders the sign-in page.

const ACCESS_TOKEN_TTL_SECONDS = 3600;
const DAY = 24 * 3600;

export interface DevProviderOptions {
  issuer: string;
  // The API audience; the other resource is `<issuer>/mcp`.
  audience: string;
  mcpResource: string;
  signingJwk: JWK;
  cookieKeys: string[];
  dataDir: string;
  renderError: (title: string, detail: string) => string;
  onServerError: (err: unknown) => void;
}

export function createDevProvider(options: DevProviderOptions): Provider {
  const { audience, mcpResource } = options;
  const resourceScopes = new Map([
    [audience, [...API_SCOPES, ...MCP_SCOPES]],
    [mcpResource, MCP_SCOPES],
  ]);
  const stored = createDevAdapter({
    clientsFile: join(options.dataDir, "dev-clients.json"),
    maxClients: REGISTRATION_LIMITS.clients,
    full: () =>
      new errors.InvalidClientMetadata(`the dev issuer holds ${REGISTRATION_LIMITS.clients} clients, each signed in; sign out of one or restart with a new data dir`),
    maxEntries: 20_000,
  });
  const provider = new Provider(options.issuer, {
    adapter: (model: string) => (model === "Client" ? unboundScope(stored(model)) : stored(model)),
    jwks: { keys: [options.signingJwk] },
    cookies: { keys: options.cookieKeys, long: { sameSite: "lax" }, short: { sameSite: "lax" } },
    findAccount: async (_ctx: unknown, sub: string) =>
      sub === DEV_USER ? { accountId: sub, claims: async () => ({ sub }) } : undefined,
    scopes: ["openid", "offline_access", ...API_SCOPES, ...MCP_SCOPES],
    clients: [
      {
        client_id: CONSOLE_CLIENT_ID,
        client_name: "agentplane console",
        application_type: "web",
        token_endpoint_auth_method: "none",
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        redirect_uris: [`${options.issuer}/console/callback`],
        scope: CONSOLE_SCOPES.join(" "),
      },
    ],
    routes: {
      authorization: "/oauth/authorize",
      token: "/oauth/token",
      registration: "/oauth/register",
      jwks: "/.well-known/jwks.json",
    },
    interactions: { url: async (_ctx: unknown, interaction: { uid: string }) => `/oauth/interaction/${interaction.uid}` },
    // Code flow only; client authentication that never makes the issuer
    // fetch a client's keys (no private_key_jwt, no jwks_uri).
    responseTypes: ["code"],
    clientAuthMethods: ["none", "client_secret_basic", "client_secret_post"],
    // Every client, public or not, proves possession with S256.
    pkce: { methods: ["S256"], required: () => true },
    // Browser clients (the console, the MCP Inspector) call the token
    // endpoint cross-origin; a code is useless without its verifier.
    clientBasedCORS: () => true,
    issueRefreshToken: async (_ctx: unknown, client: Client) => client.grantTypeAllowed("refresh_token"),
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_SECONDS,
      AuthorizationCode: 60,
      IdToken: ACCESS_TOKEN_TTL_SECONDS,
      Interaction: 600,
      RefreshToken: DAY,
      Session: DAY,
      Grant: DAY,
    },
    renderError: async (ctx: { type: string; body: string }, out: Record<string, string>) => {
      ctx.type = "html";
      ctx.body = options.renderError(out.error ?? "error", out.error_description ?? "");
    },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true, issueRegistrationAccessToken: false },
      // Advertised in discovery; the surface answers it with the dev client.
      clientCredentials: { enabled: true },
      userinfo: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      resourceIndicators: {
        enabled: true,
        // No `resource`: the API. A code or refresh token for one resource
        // keeps it.
        defaultResource: async (_ctx: unknown, _client: unknown, oneOf?: string[]) =>
          oneOf?.length ? (oneOf.length === 1 ? oneOf[0] : oneOf) : audience,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx: KoaContext, indicator: string) => {
          const scopes = resourceScopes.get(indicator);
          if (!scopes) throw new errors.InvalidTarget(`resource must be ${audience} or ${mcpResource}`);
          return {
            scope: scopes.join(" "),
            audience: indicator,
            accessTokenTTL: ACCESS_TOKEN_TTL_SECONDS,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "RS256" } },
          };
        },
      },
    },
  });
  provider.app.silent = true;
  provider.on("server_error", (_ctx, err) => options.onServerError(err));
  return provider;
}

// A registered client may ask for any scope the person may grant, not only
// the `scope` it registered with: an MCP client registers with the scopes of
// the challenge it met first and asks for more when a 403 challenges it to
// step up (MCP 2025-11-25, scope challenge handling), with the same client.
// What is granted stays bounded by the provider's scopes, by what the
// sign-in page grants (never platform:admin) and, at the call, by the role.
function unboundScope(clients: Adapter): Adapter {
  return {
    ...clients,
    async find(id) {
      const found = await clients.find(id);
      if (!found) return undefined;
      const { scope: _registered, ...client } = found;
      return client;
    },
  };
}
