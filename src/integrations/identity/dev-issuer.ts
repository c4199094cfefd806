import { randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { SignJWT, createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type JWK } from "jose";
import type Provider from "oidc-provider";
import type { DevProviderOptions } from "./dev-provider.js";
import { createJwtAuthenticator } from "./jwt.js";
import type { Authenticator } from "./principal.js";

// The embedded issuer of `agentplane dev`: it signs RS256 access tokens for
// one dev client with the seed's variant B token request, so a developer has
// real JWT auth without an external identity provider; and, through
// oidc-provider (dev-provider.ts), signs a person in with authorization code
// + PKCE. Keys, cookie keys and the client live in the data dir (mode 0600)
// so tokens and sessions survive restarts.
const DEV_SCOPES = "platform:read platform:write platform:admin mcp:platform.read mcp:platform.write";
const TOKEN_TTL_SECONDS = 3600;

interface DevState {
  privateJwk: JWK;
  clientId: string;
  clientSecret: string;
  // Sign oidc-provider's cookies; absent in data dirs from before login.
  cookieKeys?: string[];
}

export interface TokenRequest {
  grant_type?: unknown;
  client_id?: unknown;
  client_secret?: unknown;
  audience?: unknown;
  // RFC 8707, what MCP clients send: the API audience or `<issuer>/mcp`.
  resource?: unknown;
  scope?: unknown;
}

export class DevIssuer {
  // RFC 8707 resource of the MCP endpoint: the issuer is the public URL.
  readonly mcpResource: string;
  #provider?: Promise<Provider>;

  private constructor(
    readonly issuer: string,
    readonly audience: string,
    readonly clientId: string,
    readonly clientSecret: string,
    private readonly privateJwk: JWK,
    readonly publicJwks: { keys: JWK[] },
    private readonly cookieKeys: string[],
    private readonly dataDir: string,
  ) {
    this.mcpResource = `${issuer}/mcp`;
  }

  static async load(dataDir: string, issuer: string, audience: string): Promise<DevIssuer> {
    const file = join(dataDir, "dev-issuer.json");
    let state: DevState | undefined;
    if (existsSync(file)) {
      state = JSON.parse(readFileSync(file, "utf8")) as DevState;
    } else {
      const { privateKey } = await generateKeyPair("RS256", { extractable: true });
      const privateJwk = { ...(await exportJWK(privateKey)), kid: `dev-${randomBytes(6).toString("hex")}`, alg: "RS256", use: "sig" };
      state = { privateJwk, clientId: "agentplane-dev", clientSecret: randomBytes(24).toString("base64url") };
    }
    if (!state.cookieKeys) {
      state.cookieKeys = [randomBytes(32).toString("base64url")];
      mkdirSync(dataDir, { recursive: true });
      writeFileSync(file, JSON.stringify(state), { mode: 0o600 });
    }
    const { d, p, q, dp, dq, qi, ...publicJwk } = state.privateJwk; // drop the private parts
    return new DevIssuer(issuer, audience, state.clientId, state.clientSecret, state.privateJwk, { keys: [publicJwk] }, state.cookieKeys, dataDir);
  }

  // The interactive provider, loaded on first use: `serve`, and suites that
  // only need client_credentials tokens, never load oidc-provider (0.5 s).
  provider(hooks: Pick<DevProviderOptions, "renderError" | "onServerError">): Promise<Provider> {
    this.#provider ??= import("./dev-provider.js").then(({ createDevProvider }) => createDevProvider({
      ...hooks,
      issuer: this.issuer,
      audience: this.audience,
      mcpResource: this.mcpResource,
      signingJwk: this.privateJwk,
      cookieKeys: this.cookieKeys,
      dataDir: this.dataDir,
    }));
    return this.#provider;
  }

  authenticator(clockToleranceSeconds: number): Authenticator {
    return createJwtAuthenticator({
      issuer: this.issuer,
      audience: this.audience,
      mcpResource: this.mcpResource,
      algorithms: ["RS256"],
      clockToleranceSeconds,
      keySet: createLocalJWKSet(this.publicJwks),
    });
  }

  // Answers the token request with an OAuth-style error on bad input.
  async issue(req: TokenRequest): Promise<{ access_token: string; token_type: "Bearer"; expires_in: number; scope: string }> {
    if (req.grant_type !== "client_credentials")
      throw new ConnectError("unsupported_grant_type: only client_credentials", Code.InvalidArgument);
    if (!this.#clientMatches(req.client_id, req.client_secret))
      throw new ConnectError("invalid_client: unknown client or wrong secret", Code.Unauthenticated);
    if (req.audience !== undefined && req.audience !== this.audience)
      throw new ConnectError(`invalid_request: audience must be ${this.audience}`, Code.InvalidArgument);
    if (req.resource !== undefined && req.resource !== this.audience && req.resource !== this.mcpResource)
      throw new ConnectError(`invalid_target: resource must be ${this.audience} or ${this.mcpResource}`, Code.InvalidArgument);
    const audience = req.resource === this.mcpResource && req.audience === undefined ? this.mcpResource : this.audience;
    const allowed = DEV_SCOPES.split(" ");
    const requested = typeof req.scope === "string" && req.scope.trim() ? req.scope.trim().split(/\s+/) : allowed;
    const unknown = requested.filter((s) => !allowed.includes(s));
    if (unknown.length) throw new ConnectError(`invalid_scope: ${unknown.join(" ")}`, Code.InvalidArgument);
    const scope = requested.join(" ");
    const key = await importJWK(this.privateJwk, "RS256");
    const access_token = await new SignJWT({ scope, client_id: this.clientId })
      .setProtectedHeader({ alg: "RS256", kid: this.privateJwk.kid, typ: "at+jwt" })
      .setIssuer(this.issuer)
      .setAudience(audience)
      .setSubject(this.clientId)
      .setIssuedAt()
      .setExpirationTime(`${TOKEN_TTL_SECONDS}s`)
      .setJti(randomBytes(12).toString("base64url"))
      .sign(key);
    return { access_token, token_type: "Bearer", expires_in: TOKEN_TTL_SECONDS, scope };
  }

  #clientMatches(clientId: unknown, secret: unknown): boolean {
    if (clientId !== this.clientId || typeof secret !== "string") return false;
    const a = Buffer.from(secret);
    const b = Buffer.from(this.clientSecret);
    return a.length === b.length && timingSafeEqual(a, b);
  }
}
