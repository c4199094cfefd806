/**
 * The standard ways a customer protects its MCP server, for the skill client's
 * interoperability tests:
 *
 * - startAuthorizationServer: a real `oidc-provider` with the client
 *   credentials grant and resource indicators (the token's `aud` is the
 *   requested `resource`), the token endpoint client authentication methods
 *   it is told to accept and advertise, clients registered at any time (a
 *   private_key_jwt client's `jwks` is only known once the skill exists), an
 *   issuer with or without a path, and its metadata at only the RFC 8414 /
 *   OpenID locations it is told. It records which method each token request
 *   used as it arrived on the wire (oidc-provider itself accepts
 *   client_secret_basic and client_secret_post interchangeably, so a
 *   success alone does not say which one was sent).
 * - startProtectedMcp: a real MCP SDK server (stateless Streamable HTTP, one
 *   tool `echo`) that verifies every request's JWT access token with jose
 *   against the authorization server's JWKS (issuer, audience = its resource,
 *   exp, scope), serves its RFC 9728 metadata at exactly one of the four
 *   locations a client may look, and can refuse authenticated requests with
 *   a 403.
 * - startLegacyMcp: a server built for MCP 2025-03-26, its own authorization
 *   server at its origin, with no resource metadata (and optionally no
 *   authorization server metadata either).
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify } from "jose";
// The SDK's (hoisted) dependency; McpServer.registerTool only accepts zod schemas.
import * as z from "zod";

import { listenOnLoopback } from "./listen.js";
import { createAdapterFactory, loadOidcProvider } from "./oidc-idp.js";

export const MCP_SCOPE = "mcp:tools";

export type ClientAuthMethod = "client_secret_basic" | "client_secret_post" | "private_key_jwt";
export const ALL_METHODS: ClientAuthMethod[] = ["client_secret_basic", "client_secret_post", "private_key_jwt"];

/** RFC 8414 §3.1 and OpenID Discovery locations of an issuer's metadata. */
export type AsMetadataLocation = "oauth-inserted" | "oidc-inserted" | "oidc-appended";

export interface AsClient {
  clientId: string;
  method: ClientAuthMethod;
  clientSecret?: string;
  /** private_key_jwt: the client's public keys (the skill's `public_jwk`). */
  jwks?: { keys: unknown[] };
}

export interface TokenRequestSeen {
  clientId?: string;
  /** As it arrived: a Basic header, a client_secret form field, or a client_assertion. */
  method: ClientAuthMethod | "none";
  assertion?: { header: Record<string, unknown>; payload: Record<string, unknown> };
  resource?: string;
  /** The OAuth error the provider answered with, if it refused. */
  error?: string;
}

export interface AuthorizationServerOptions {
  /** The methods the provider accepts and advertises; default all three. */
  methods?: ClientAuthMethod[];
  /** false: the metadata leaves out token_endpoint_auth_methods_supported. */
  advertiseMethods?: boolean;
  /** e.g. "/tenant1": the issuer has this path and the provider is mounted there. */
  issuerPath?: string;
  /** Where the metadata is served (404 elsewhere); default every location. */
  metadataAt?: AsMetadataLocation[];
  /** Other handlers on the provider's own origin, by path (an MCP 2025-03-26 server's /mcp). */
  routes?: Record<string, (req: IncomingMessage, res: ServerResponse) => void>;
}

export interface AuthorizationServer {
  issuer: string;
  jwksUrl: string;
  addClient(client: AsClient): Promise<void>;
  tokenRequests(): TokenRequestSeen[];
  /** Paths of every GET of a well-known URL, in order. */
  metadataRequests(): string[];
  stop(): Promise<void>;
}

// oidc-provider's context, as far as the event listeners read it.
interface GrantContext {
  headers: Record<string, string | undefined>;
  oidc?: { params?: Record<string, unknown>; client?: { clientId: string } };
}

const RAW = "x-fixture-raw";

function closer(server: Server): () => Promise<void> {
  let closed: Promise<void> | undefined;
  return () =>
    (closed ??= new Promise<void>((resolve, reject) => {
      server.close((err) => (err ? reject(err) : resolve()));
      server.closeAllConnections();
    }));
}

export async function startAuthorizationServer(opts: AuthorizationServerOptions = {}): Promise<AuthorizationServer> {
  const { default: Provider } = await loadOidcProvider();
  const adapter = createAdapterFactory();
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const signingJwk = { ...(await exportJWK(privateKey)), kid: "as-key", alg: "RS256", use: "sig" };

  const server = createServer();
  const port = await listenOnLoopback(server);
  const prefix = opts.issuerPath ?? "";
  const issuer = `http://127.0.0.1:${port}${prefix}`;

  const provider = new Provider(issuer, {
    adapter,
    jwks: { keys: [signingJwk] },
    cookies: { keys: [randomBytes(32).toString("base64url")] },
    scopes: [MCP_SCOPE],
    clientAuthMethods: opts.methods ?? ALL_METHODS,
    ttl: { ClientCredentials: 300 },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: async (_ctx: unknown, resource: string) => ({
          scope: MCP_SCOPE,
          audience: resource,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
  });
  provider.app.silent = true;

  const seen: TokenRequestSeen[] = [];
  const record = (ctx: GrantContext, error?: string): void => {
    const params = ctx.oidc?.params ?? {};
    const assertion = typeof params.client_assertion === "string" ? params.client_assertion : undefined;
    const method = /^Basic /i.test(ctx.headers.authorization ?? "")
      ? "client_secret_basic"
      : assertion
        ? "private_key_jwt"
        : typeof params.client_secret === "string"
          ? "client_secret_post"
          : "none";
    seen.push({
      clientId: ctx.oidc?.client?.clientId,
      method,
      ...(assertion ? { assertion: { header: decodeProtectedHeader(assertion) as Record<string, unknown>, payload: decodeJwt(assertion) } } : {}),
      ...(typeof params.resource === "string" ? { resource: params.resource } : {}),
      ...(error ? { error } : {}),
    });
  };
  provider.on("grant.success", (ctx) => record(ctx as GrantContext));
  provider.on("grant.error", (ctx, err) => record(ctx as GrantContext, (err as { error?: string }).error ?? "error"));

  const locations: Record<string, AsMetadataLocation> = prefix
    ? {
        [`/.well-known/oauth-authorization-server${prefix}`]: "oauth-inserted",
        [`/.well-known/openid-configuration${prefix}`]: "oidc-inserted",
        [`${prefix}/.well-known/openid-configuration`]: "oidc-appended",
      }
    : { "/.well-known/oauth-authorization-server": "oauth-inserted", "/.well-known/openid-configuration": "oidc-inserted" };
  const servedAt = new Set(opts.metadataAt ?? ["oauth-inserted", "oidc-inserted", "oidc-appended"]);
  const metadataRequests: string[] = [];
  let metadata = "";

  const handler = provider.callback();
  server.on("request", (req: IncomingMessage & { originalUrl?: string }, res: ServerResponse) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const route = opts.routes?.[path];
    if (route) return route(req, res);
    if (req.method === "GET" && path.includes("/.well-known/") && req.headers[RAW] === undefined) {
      metadataRequests.push(path);
      const location = locations[path];
      if (location && servedAt.has(location)) res.writeHead(200, { "content-type": "application/json" }).end(metadata);
      else res.writeHead(404, { "content-type": "text/plain" }).end("Not Found");
      return;
    }
    // Mounted below the issuer's path, as oidc-provider reads it (originalUrl).
    if (prefix && path.startsWith(`${prefix}/`)) {
      req.originalUrl = req.url;
      req.url = req.url!.slice(prefix.length);
    }
    handler(req, res);
  });

  const discovery = await fetch(`${issuer}/.well-known/openid-configuration`, { headers: { [RAW]: "1" } });
  const doc = (await discovery.json()) as Record<string, unknown>;
  if (opts.advertiseMethods === false) delete doc.token_endpoint_auth_methods_supported;
  metadata = JSON.stringify(doc);

  return {
    issuer,
    jwksUrl: doc.jwks_uri as string,
    async addClient(client) {
      await (adapter("Client") as { upsert(id: string, payload: object): Promise<void> }).upsert(client.clientId, {
        client_id: client.clientId,
        ...(client.clientSecret ? { client_secret: client.clientSecret } : {}),
        ...(client.jwks ? { jwks: client.jwks } : {}),
        token_endpoint_auth_method: client.method,
        grant_types: ["client_credentials"],
        response_types: [],
        redirect_uris: [],
        scope: MCP_SCOPE,
      });
    },
    tokenRequests: () => seen.map((s) => ({ ...s })),
    metadataRequests: () => [...metadataRequests],
    stop: closer(server),
  };
}

/** Where a protected MCP server publishes its RFC 9728 metadata (only there). */
export type ResourceMetadataLocation =
  | "challenge" // /metadata/prm.json, a path only the 401 challenge names
  | "path-inserted" // /.well-known/oauth-protected-resource/mcp
  | "root" // /.well-known/oauth-protected-resource
  | "seed" // /mcp/.well-known/oauth-protected-resource
  | "none"; // nowhere: a server built for MCP 2025-03-26

export interface ProtectedMcpOptions {
  issuer: string;
  jwksUrl: string;
  metadataAt: ResourceMetadataLocation;
  /** Whether the 401 challenge carries resource_metadata; default: only for "challenge". */
  challengeNamesMetadata?: boolean;
  /** Appended to the skill URL (`?tenant=a`); the resource stays without it. */
  query?: string;
  /** Path of the metadata's `resource` (which tokens must carry as `aud`) on this server; default /mcp. */
  resourcePath?: string;
  /** Bytes of padding in the metadata document. */
  metadataPadding?: number;
  /** Authenticated requests are answered with this instead of MCP. */
  forbid?: { status: number; headers: Record<string, string>; body: string };
}

export interface ProtectedMcp {
  /** The skill URL (with `query`). */
  url: string;
  resource: string;
  metadataUrl: string;
  /** Paths of every GET of a metadata location, in order. */
  metadataRequests(): string[];
  toolCalls(): number;
  close(): Promise<void>;
}

const METADATA_PATHS: Record<Exclude<ResourceMetadataLocation, "none">, string> = {
  challenge: "/metadata/prm.json",
  "path-inserted": "/.well-known/oauth-protected-resource/mcp",
  root: "/.well-known/oauth-protected-resource",
  seed: "/mcp/.well-known/oauth-protected-resource",
};

export async function startProtectedMcp(opts: ProtectedMcpOptions): Promise<ProtectedMcp> {
  let base = "";
  const mcp = protectedMcpHandler(opts, () => base);
  const http = createServer(mcp.handle);
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  return {
    url: `${base}/mcp${opts.query ? `?${opts.query}` : ""}`,
    resource: mcp.resource(),
    metadataUrl: opts.metadataAt === "none" ? "" : `${base}${METADATA_PATHS[opts.metadataAt]}`,
    metadataRequests: mcp.metadataRequests,
    toolCalls: mcp.toolCalls,
    close: closer(http),
  };
}

export interface LegacyMcp {
  /** The skill URL, `<origin>/mcp`; the origin is the issuer. */
  url: string;
  as: AuthorizationServer;
  toolCalls(): number;
}

/**
 * A server built for MCP 2025-03-26: its own authorization server at its
 * origin (oidc-provider, token endpoint `/token`), no RFC 9728 metadata;
 * `asMetadata: false` serves no RFC 8414 / OpenID document either, so only
 * the revision's default endpoints tell a client where to go.
 */
export async function startLegacyMcp(opts: { asMetadata: boolean; methods?: ClientAuthMethod[] }): Promise<LegacyMcp> {
  // The MCP handler needs the provider's issuer and JWKS, known once it listens.
  const mounted: { mcp?: ReturnType<typeof protectedMcpHandler> } = {};
  const as = await startAuthorizationServer({
    methods: opts.methods,
    metadataAt: opts.asMetadata ? ["oauth-inserted"] : [],
    routes: { "/mcp": (req, res) => mounted.mcp!.handle(req, res) },
  });
  const mcp = (mounted.mcp = protectedMcpHandler({ issuer: as.issuer, jwksUrl: as.jwksUrl, metadataAt: "none" }, () => as.issuer));
  return { url: `${as.issuer}/mcp`, as, toolCalls: mcp.toolCalls };
}

function protectedMcpHandler(opts: ProtectedMcpOptions, origin: () => string) {
  const jwks = createRemoteJWKSet(new URL(opts.jwksUrl));
  const namesMetadata = opts.metadataAt !== "none" && (opts.challengeNamesMetadata ?? opts.metadataAt === "challenge");
  const metadataRequests: string[] = [];
  let calls = 0;
  const resource = () => `${origin()}${opts.resourcePath ?? "/mcp"}`;

  const mcpServer = (): McpServer => {
    const server = new McpServer({ name: "protected-mcp", version: "1.0.0" });
    server.registerTool(
      "echo",
      { description: "Echoes the text back.", inputSchema: { text: z.string() }, outputSchema: { text: z.string() } },
      async ({ text }) => {
        calls += 1;
        return { content: [{ type: "text", text }], structuredContent: { text } };
      },
    );
    return server;
  };

  const refuse = (res: ServerResponse, description: string): void => {
    const params = [...(namesMetadata ? [`resource_metadata="${origin()}${METADATA_PATHS[opts.metadataAt as keyof typeof METADATA_PATHS]}"`] : []), 'error="invalid_token"'];
    res.writeHead(401, { "www-authenticate": `Bearer ${params.join(", ")}`, "content-type": "text/plain" }).end(description);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (req.method === "GET" && Object.values(METADATA_PATHS).includes(path)) {
      metadataRequests.push(path);
      if (opts.metadataAt === "none" || path !== METADATA_PATHS[opts.metadataAt]) return void res.writeHead(404, { "content-type": "text/plain" }).end("Not Found");
      const doc = {
        resource: resource(),
        authorization_servers: [opts.issuer],
        scopes_supported: [MCP_SCOPE],
        ...(opts.metadataPadding ? { padding: "x".repeat(opts.metadataPadding) } : {}),
      };
      return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(doc));
    }
    if (path !== "/mcp") return void res.writeHead(404, { "content-type": "text/plain" }).end("Not Found");
    const token = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
    if (!token) return refuse(res, "Missing Authorization header");
    try {
      const { payload } = await jwtVerify(token, jwks, { issuer: opts.issuer, audience: resource(), requiredClaims: ["exp"] });
      if (!String(payload.scope ?? "").split(" ").includes(MCP_SCOPE)) throw new Error("scope");
    } catch {
      return refuse(res, "Invalid access token");
    }
    if (opts.forbid) return void res.writeHead(opts.forbid.status, opts.forbid.headers).end(opts.forbid.body);
    if (req.method !== "POST") return void res.writeHead(405, { allow: "POST" }).end();
    const server = mcpServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  };

  return {
    handle: (req: IncomingMessage, res: ServerResponse): void => {
      handle(req, res).catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
      });
    },
    resource,
    metadataRequests: () => [...metadataRequests],
    toolCalls: () => calls,
  };
}
