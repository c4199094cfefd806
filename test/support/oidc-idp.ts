/**
 * In-process OAuth 2.0 / OIDC identity provider for end-to-end tests, built on
 * the real `oidc-provider` (v8.8.x) package. It issues genuine
 * client_credentials access tokens (JWT or opaque), serves a real JWKS and a
 * real RFC 7662 introspection endpoint over HTTP on 127.0.0.1.
 *
 * Observed behaviour of oidc-provider 8.8 that tests may rely on:
 *
 * - JWT access tokens (header `typ: at+jwt`, `alg: RS256`, `kid` = our key id)
 *   carry: jti, sub, iat, exp, scope, client_id, iss, aud.
 *   For client_credentials there is no end-user, so oidc-provider sets
 *   `sub` = client_id in the JWT format (models/formats/jwt.js:
 *   `sub: sub || clientId`). The service under test falls back to client_id
 *   when `sub` is absent, which gives the same principal either way.
 * - Introspection of an opaque client_credentials token answers
 *   `{ active, client_id, exp, iat, iss, aud, scope, token_type: "Bearer" }`
 *   and has NO `sub` (only tokens bound to an account get one).
 *   JWT-format tokens are not stored by oidc-provider, so introspecting one
 *   answers `{ active: false }`.
 * - The scope granted is the requested scope intersected with the resource
 *   server's scope. Requesting a scope that the client's registered `scope`
 *   does not allow is rejected with `invalid_scope` (this only happens because
 *   every scope is also listed in the provider-level `scopes` option; without
 *   that oidc-provider would also refuse the client's `scope` metadata).
 */
import { randomBytes, randomUUID } from "node:crypto";
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";

import { exportJWK, generateKeyPair, type JWK } from "jose";
import { listenOnLoopback } from "./listen.js";

export interface IdpClient {
  clientId: string;
  clientSecret: string;
  /** Space-separated list of the scopes this client may request. */
  scope: string;
}

/**
 * A browser app's client: authorization code with PKCE, no secret. Its users
 * sign in on oidc-provider's development login page (any login name becomes
 * the token's `sub`) and confirm on its consent page.
 */
export interface IdpPublicClient {
  clientId: string;
  redirectUris: string[];
  /** Space-separated list of the scopes this client may request. */
  scope: string;
}

export interface StartIdpOptions {
  clients: IdpClient[];
  publicClients?: IdpPublicClient[];
  /** Every scope the provider knows (and the resource server accepts). */
  scopes: string[];
  /** Resource indicator / `aud` of the issued access tokens. */
  audience: string;
  accessTokenFormat: "jwt" | "opaque";
  /** Access token lifetime, default 300 seconds. */
  accessTokenTtlSeconds?: number;
}

export interface TestIdp {
  /** Exactly the string the provider puts in `iss`, e.g. http://127.0.0.1:PORT */
  issuer: string;
  jwksUrl: string;
  tokenEndpoint: string;
  introspectionEndpoint: string;
  /** POSTs to the introspection path that reached the provider (not counted while down). */
  introspectionCalls(): number;
  /** Real client_credentials grant (client_secret_basic, resource=audience); returns access_token. */
  token(clientId: string, scope: string): Promise<string>;
  /** The provider's private RS256 signing key(s), so tests can forge tokens with jose. */
  privateJwks: { keys: JWK[] };
  stop(): Promise<void>;
  /** While true every request gets its socket destroyed (simulates an unreachable IdP). */
  setDown(down: boolean): void;
}

// ---------------------------------------------------------------------------
// Minimal typing of the parts of oidc-provider used here. oidc-provider 8 ships
// no type declarations (and @types/oidc-provider is not installed), so the
// module is loaded through a non-literal dynamic import and narrowed to this
// shape instead of suppressing a compiler error on a static import.
// ---------------------------------------------------------------------------

export interface OidcProviderInstance {
  readonly issuer: string;
  /** The underlying Koa application. */
  readonly app: { silent: boolean };
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

export interface OidcProviderModule {
  default: new (
    issuer: string,
    configuration: Record<string, unknown>,
  ) => OidcProviderInstance;
  errors: {
    InvalidTarget: new (description?: string) => Error;
  };
}

/** What oidc-provider passes to the ttl / allowedPolicy helpers (subset). */
interface ProviderClient {
  clientId: string;
  scope?: string;
}

interface AdapterPayload {
  consumed?: number;
  uid?: string;
  userCode?: string;
  grantId?: string;
  [key: string]: unknown;
}

const OIDC_PROVIDER_MODULE: string = "oidc-provider";
let providerModule: Promise<OidcProviderModule> | undefined;

export function loadOidcProvider(): Promise<OidcProviderModule> {
  providerModule ??= import(OIDC_PROVIDER_MODULE).then(
    (mod: unknown) => mod as OidcProviderModule,
  );
  return providerModule;
}

/**
 * Per-provider in-memory storage. oidc-provider's bundled MemoryAdapter keeps a
 * module-global 1000-entry LRU shared by every provider in the process and
 * prints a warning; this one is isolated per startIdp() call and silent.
 */
export function createAdapterFactory(): (model: string) => object {
  const store = new Map<string, { payload: AdapterPayload; expiresAt: number | undefined }>();
  const index = new Map<string, string>(); // e.g. "Session:uid:<uid>" -> id
  const grants = new Map<string, string[]>(); // grantId -> storage keys

  const nowSeconds = (): number => Math.floor(Date.now() / 1000);
  const read = (key: string): AdapterPayload | undefined => {
    const entry = store.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt !== undefined && entry.expiresAt <= Date.now()) {
      store.delete(key);
      return undefined;
    }
    return entry.payload;
  };

  return (model: string) => {
    const keyFor = (id: string): string => `${model}:${id}`;
    return {
      async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
        const key = keyFor(id);
        const expiresAt = expiresIn ? Date.now() + expiresIn * 1000 : undefined;
        store.set(key, { payload, expiresAt });
        if (typeof payload.uid === "string") index.set(`${model}:uid:${payload.uid}`, id);
        if (typeof payload.userCode === "string") {
          index.set(`${model}:userCode:${payload.userCode}`, id);
        }
        if (typeof payload.grantId === "string") {
          const keys = grants.get(payload.grantId) ?? [];
          keys.push(key);
          grants.set(payload.grantId, keys);
        }
      },
      async find(id: string): Promise<AdapterPayload | undefined> {
        return read(keyFor(id));
      },
      async findByUid(uid: string): Promise<AdapterPayload | undefined> {
        const id = index.get(`${model}:uid:${uid}`);
        return id === undefined ? undefined : read(keyFor(id));
      },
      async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
        const id = index.get(`${model}:userCode:${userCode}`);
        return id === undefined ? undefined : read(keyFor(id));
      },
      async consume(id: string): Promise<void> {
        const payload = read(keyFor(id));
        if (payload) payload.consumed = nowSeconds();
      },
      async destroy(id: string): Promise<void> {
        store.delete(keyFor(id));
      },
      async revokeByGrantId(grantId: string): Promise<void> {
        for (const key of grants.get(grantId) ?? []) store.delete(key);
        grants.delete(grantId);
      },
    };
  };
}

export async function startIdp(opts: StartIdpOptions): Promise<TestIdp> {
  const { default: Provider, errors } = await loadOidcProvider();
  const accessTokenTtl = opts.accessTokenTtlSeconds ?? 300;
  const allScopes = [...new Set(opts.scopes)];
  const publicClients = opts.publicClients ?? [];

  // RS256 signing key; the private JWK is handed to the provider and the tests.
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const signingJwk: JWK = {
    ...(await exportJWK(privateKey)),
    kid: `test-idp-${randomUUID()}`,
    alg: "RS256",
    use: "sig",
  };
  const privateJwks = { keys: [signingJwk] };

  // The issuer contains the port, so bind first and attach the request
  // handler once the provider exists (nothing knows the port before that).
  let down = false;
  let introspections = 0;
  const INTROSPECTION_PATH = "/token/introspection";

  const server: Server = createServer();
  // Past any test's length: the clients here (undici) keep an idle socket
  // for the server's Keep-Alive hint less a second, and on a loaded machine
  // a request sent near the end of Node's default 5 s met the server's close
  // (ECONNRESET on the token endpoint, a make test beside another).
  server.keepAliveTimeout = 600_000;
  const port = await listenOnLoopback(server);
  // Plain http on loopback is accepted by oidc-provider as an issuer (it only
  // warns about https issuers reached without TLS / x-forwarded-proto).
  const issuer = `http://127.0.0.1:${port}`;

  const provider = new Provider(issuer, {
    adapter: createAdapterFactory(),
    jwks: privateJwks,
    cookies: { keys: [randomBytes(32).toString("base64url")] },
    // Registered scopes must be known to the provider or the client `scope`
    // metadata is rejected ("scope must only contain Authorization Server
    // supported scope values"); this also makes the per-client allow-list apply.
    scopes: allScopes,
    clients: [
      ...opts.clients.map((c) => ({
        client_id: c.clientId,
        client_secret: c.clientSecret,
        scope: c.scope,
        token_endpoint_auth_method: "client_secret_basic",
        grant_types: ["client_credentials"],
        response_types: [],
        redirect_uris: [],
      })),
      ...publicClients.map((c) => ({
        client_id: c.clientId,
        scope: c.scope,
        token_endpoint_auth_method: "none",
        application_type: "web",
        grant_types: ["authorization_code"],
        response_types: ["code"],
        redirect_uris: c.redirectUris,
      })),
    ],
    // PKCE (S256) is required of every authorization code request.
    pkce: { required: () => true },
    ttl: {
      AccessToken: accessTokenTtl,
      ClientCredentials: accessTokenTtl,
      // The code flow's artifacts (public clients).
      Interaction: 600,
      Session: 3600,
      Grant: 3600,
      IdToken: accessTokenTtl,
      AuthorizationCode: 60,
    },
    // Whoever signs in on the development login page is that account.
    findAccount: async (_ctx: unknown, sub: string) => ({ accountId: sub, claims: async () => ({ sub }) }),
    // Browser apps call the token endpoint from their redirect URIs' origins.
    clientBasedCORS: (_ctx: unknown, origin: string, client: ProviderClient) =>
      publicClients.some((c) => c.clientId === client.clientId && c.redirectUris.some((u) => new URL(u).origin === origin)),
    routes: { token: "/token", introspection: INTROSPECTION_PATH, jwks: "/jwks" },
    features: {
      // The built-in login and consent pages, for the public clients' users.
      devInteractions: { enabled: publicClients.length > 0 },
      clientCredentials: { enabled: true },
      introspection: {
        enabled: true,
        // The default policy allows it too, but logs a notice; the token
        // endpoint auth middleware has already authenticated the caller as a
        // registered (confidential) client, which is all tests need.
        allowedPolicy: async (): Promise<boolean> => true,
      },
      resourceIndicators: {
        enabled: true,
        // No `resource` in the request -> use the audience (client_credentials
        // only consults defaultResource; useGrantedResource applies to
        // code/refresh exchanges and is enabled for completeness).
        defaultResource: async (): Promise<string> => opts.audience,
        useGrantedResource: async (): Promise<boolean> => true,
        getResourceServerInfo: async (
          _ctx: unknown,
          resourceIndicator: string,
          _client: ProviderClient,
        ): Promise<Record<string, unknown>> => {
          if (resourceIndicator !== opts.audience) {
            throw new errors.InvalidTarget(`unknown resource ${resourceIndicator}`);
          }
          return {
            scope: allScopes.join(" "),
            audience: opts.audience,
            accessTokenTTL: accessTokenTtl,
            accessTokenFormat: opts.accessTokenFormat,
            ...(opts.accessTokenFormat === "jwt"
              ? { jwt: { sign: { alg: "RS256" } } }
              : {}),
          };
        },
      },
    },
  });
  provider.app.silent = true; // no Koa stderr logging of unexpected errors
  const providerHandler = provider.callback();
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    if (down) {
      req.socket.destroy();
      return;
    }
    const path = (req.url ?? "").split("?")[0];
    if (req.method === "POST" && path === INTROSPECTION_PATH) introspections += 1;
    providerHandler(req, res);
  });

  const tokenEndpoint = `${issuer}/token`;
  const clientsById = new Map(opts.clients.map((c) => [c.clientId, c]));

  async function token(clientId: string, scope: string): Promise<string> {
    const client = clientsById.get(clientId);
    if (client === undefined) throw new Error(`test IdP: unknown client ${clientId}`);
    // RFC 6749 section 2.3.1: form-encode id and secret before base64.
    const basic = Buffer.from(
      `${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`,
    ).toString("base64");
    const res = await fetch(tokenEndpoint, {
      method: "POST",
      headers: {
        authorization: `Basic ${basic}`,
        "content-type": "application/x-www-form-urlencoded",
        accept: "application/json",
      },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        scope,
        resource: opts.audience,
      }).toString(),
    });
    const body = (await res.json()) as { access_token?: unknown };
    if (!res.ok || typeof body.access_token !== "string") {
      throw new Error(`test IdP: token request failed (${res.status}): ${JSON.stringify(body)}`);
    }
    return body.access_token;
  }

  let stopped: Promise<void> | undefined;
  function stop(): Promise<void> {
    stopped ??= new Promise<void>((resolve, reject) => {
      server.close((err) => (err ? reject(err) : resolve()));
      server.closeAllConnections();
    });
    return stopped;
  }

  return {
    issuer: provider.issuer,
    jwksUrl: `${issuer}/jwks`,
    tokenEndpoint,
    introspectionEndpoint: `${issuer}${INTROSPECTION_PATH}`,
    introspectionCalls: () => introspections,
    token,
    privateJwks,
    stop,
    setDown: (value: boolean) => {
      down = value;
    },
  };
}
