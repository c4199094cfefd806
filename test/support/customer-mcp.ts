/**
 * Customer-operated MCP servers ("skills") for end-to-end tests: real
 * `@modelcontextprotocol/sdk` McpServer instances behind a plain node:http
 * server on 127.0.0.1, in the three shapes the seed describes (section 5.2):
 *
 * - startOpenMcp: no authentication.
 * - startStaticBearerMcp: compares `Authorization: Bearer <token>` on every
 *   request; a mismatch answers 401 with the JSON-RPC body
 *   `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Unauthorized"},"id":null}`.
 * - startHeadersMcp: compares a set of configured headers (`X-API-Key`,
 *   `Authorization: Basic …`) on every request; a mismatch is the same 401.
 * - startOAuthMcp: an OAuth protected resource. Serves RFC 9728 metadata
 *   (seed 4.3), answers unauthenticated requests with a
 *   `WWW-Authenticate: Bearer resource_metadata="…", error="invalid_token"`
 *   challenge and a text/plain body, and validates every request's JWT access
 *   token (signature via the issuer's JWKS, iss, aud = this server's /mcp URL,
 *   exp, required scope).
 *
 * Transport: stateless Streamable HTTP (a fresh McpServer + transport per
 * request, no session ids, JSON responses instead of SSE). Only POST is
 * served on /mcp; GET and DELETE get 405 (what the SDK client expects from a
 * stateless server when it tries to open the standalone SSE stream).
 *
 * Why not the SDK's `requireBearerAuth`: it is Express middleware (and
 * @types/express is not installed), and its challenge format
 * (`Bearer error="…", error_description="…", scope="…", resource_metadata="…"`
 * with a JSON body) differs from the seed's exact header and text/plain body.
 * The checks are written directly below with jose instead.
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createRemoteJWKSet, errors as joseErrors, jwtVerify } from "jose";
// zod is not a direct dependency of the project; it is the SDK's (hoisted)
// dependency, and McpServer.registerTool only accepts zod schemas.
import * as z from "zod";

export interface CustomerMcp {
  /** http://127.0.0.1:PORT/mcp */
  url: string;
  /** HTTP requests that reached /mcp (any method, any status). */
  requests(): number;
  /** The `traceparent` header of each request to /mcp ("" when absent), in order. */
  traceparents(): string[];
  /** Each request to /mcp, in order: its HTTP method, JSON-RPC methods and headers. */
  requestLog(): LoggedRequest[];
  /**
   * Every `tools/call` POSTed to /mcp, in order, with its `params._meta`:
   * also those refused, failed with failNext or redirected before any tool ran.
   */
  toolCallRequests(): ToolCallRequest[];
  /** Requests to /mcp that passed authentication (all of them for an open server). */
  authorizedRequests(): number;
  /** Every tool invocation that reached a tool handler, in order. */
  toolCalls(): { name: string; arguments: unknown }[];
  /** The "track" calls that completed, with when each ran. */
  trackedCalls(): TrackedCall[];
  /**
   * Holds every "track" call (started or to come) before it answers, until
   * the returned function is called: a run stays mid-step for as long as a
   * test needs, whatever the machine's load.
   */
  holdTrack(): () => void;
  /** The keys of the "track" calls waiting for a hold right now. */
  heldTrackKeys(): string[];
  /** As holdTrack, only the "track" calls of this key. */
  holdTrackKey(key: string): () => void;
  /** Authenticated requests answered with the `redirect` option's redirect. */
  redirects(): number;
  /**
   * The next `n` authenticated POSTs to /mcp (only those of JSON-RPC
   * `method` when given) are answered 503 (a transient failure to a
   * client), before any tool runs; counted in requests().
   */
  failNext(n: number, method?: string): void;
  close(): Promise<void>;
}

export interface LoggedRequest {
  httpMethod: string;
  /** The JSON-RPC methods of a POST's message(s); [] for GET and DELETE. */
  rpcMethods: string[];
  /** As received, names lower-case. */
  headers: IncomingHttpHeaders;
}

export interface ToolCallRequest {
  name: string;
  meta: Record<string, unknown> | undefined;
}

export interface TrackedCall {
  key: string;
  start: number;
  end: number;
}

export interface CustomerMcpOptions {
  /** Listen on this port (e.g. one from reservePort()); default: any free port. */
  port?: number;
  /**
   * Authenticated /mcp requests with this method are answered `status`
   * (default 302 for GET, 307 otherwise) with `Location: to` instead of MCP.
   */
  redirect?: { method: "GET" | "POST"; to: string; status?: number };
}

export interface OAuthMcpOptions extends CustomerMcpOptions {
  /** The authorization server's issuer (TestIdp.issuer); tokens must carry exactly this `iss`. */
  issuer: string;
  jwksUrl: string;
  /** e.g. "mcp:crm"; tokens without it get 403 insufficient_scope. */
  requiredScope: string;
  /** `authorization_servers[0]` in the metadata; default = issuer. */
  advertisedIssuer?: string;
  /** `resource` in the metadata; default = this server's /mcp URL. Token `aud` is still checked against the real URL. */
  advertisedResource?: string;
  /**
   * Where the metadata is served (only there; the other path is a 404) and
   * which URL the challenge names:
   *  - "seed" (default): {app}/mcp/.well-known/oauth-protected-resource
   *  - "rfc9728":        {app}/.well-known/oauth-protected-resource/mcp
   */
  metadataPath?: "seed" | "rfc9728";
  /** 401 challenges omit resource_metadata: `WWW-Authenticate: Bearer error="invalid_token"`. */
  challengeWithoutMetadataUrl?: boolean;
}

export interface OAuthCustomerMcp extends CustomerMcp {
  /** Absolute URL the metadata document is served at. */
  metadataUrl: string;
  /** GETs that reached the metadata path. */
  metadataRequests(): number;
}

/** The exact JSON-RPC body of a static-bearer mismatch (seed 5.2). */
export const STATIC_UNAUTHORIZED_BODY =
  '{"jsonrpc":"2.0","error":{"code":-32000,"message":"Unauthorized"},"id":null}';

const MCP_PATH = "/mcp";
const SEED_METADATA_PATH = "/mcp/.well-known/oauth-protected-resource";
const RFC9728_METADATA_PATH = "/.well-known/oauth-protected-resource/mcp";

/**
 * A currently free TCP port on 127.0.0.1 (bound, then released). Lets a test
 * know the MCP URL before the server exists, e.g. to start the IdP with
 * `audience: http://127.0.0.1:<port>/mcp` and then startOAuthMcp({ port }).
 */
export async function reservePort(): Promise<number> {
  const probe = createNetServer();
  await new Promise<void>((resolve, reject) => {
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve, reject) => probe.close((err) => (err ? reject(err) : resolve())));
  return port;
}

// ---------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------

interface ToolState {
  calls: { name: string; arguments: unknown }[];
  /** Each "track" call with the time it ran, to tell overlapping executions apart. */
  tracked: TrackedCall[];
  /** Pending "slow" timers, cleared on close() so nothing outlives the server. */
  timers: Set<{ timer: NodeJS.Timeout; cancel: () => void }>;
  /** While set, "track" calls wait for it before answering (holdTrack). */
  trackGate?: Promise<void>;
  /** The keys of the calls waiting at a gate. */
  held: string[];
  /** Gates of single keys (holdTrackKey). */
  keyGates: Map<string, Promise<void>>;
}

function buildMcpServer(state: ToolState): McpServer {
  const server = new McpServer({ name: "customer-mcp", version: "1.0.0" });

  server.registerTool(
    "echo",
    {
      description: "Echoes the text back.",
      inputSchema: { text: z.string() },
      outputSchema: { text: z.string() },
    },
    async ({ text }): Promise<CallToolResult> => {
      state.calls.push({ name: "echo", arguments: { text } });
      return { content: [{ type: "text", text: `echo: ${text}` }], structuredContent: { text } };
    },
  );

  server.registerTool(
    "add",
    {
      description: "Adds two numbers.",
      inputSchema: { a: z.number(), b: z.number() },
      outputSchema: { sum: z.number() },
    },
    async ({ a, b }): Promise<CallToolResult> => {
      state.calls.push({ name: "add", arguments: { a, b } });
      const result = { sum: a + b };
      return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
    },
  );

  server.registerTool(
    "fail",
    { description: "Always fails with a tool-level error.", inputSchema: {} },
    async (): Promise<CallToolResult> => {
      state.calls.push({ name: "fail", arguments: {} });
      return { content: [{ type: "text", text: "it failed" }], isError: true };
    },
  );

  server.registerTool(
    "track",
    {
      description: "Waits ms milliseconds and records when it ran under key.",
      inputSchema: { key: z.string(), ms: z.number().nonnegative() },
    },
    async ({ key, ms }): Promise<CallToolResult> => {
      const start = Date.now();
      await new Promise((resolve) => setTimeout(resolve, ms));
      for (let gate; (gate = state.trackGate ?? state.keyGates.get(key)); ) {
        state.held.push(key);
        await gate;
        state.held.splice(state.held.indexOf(key), 1);
      }
      state.tracked.push({ key, start, end: Date.now() });
      return { content: [{ type: "text", text: "tracked" }] };
    },
  );

  server.registerTool(
    "slow",
    {
      description: "Waits ms milliseconds, then answers.",
      inputSchema: { ms: z.number().nonnegative() },
      outputSchema: { waited: z.number() },
    },
    async ({ ms }, extra): Promise<CallToolResult> => {
      state.calls.push({ name: "slow", arguments: { ms } });
      await new Promise<void>((resolve, reject) => {
        const entry = {
          timer: setTimeout(() => {
            state.timers.delete(entry);
            extra.signal.removeEventListener("abort", onAbort);
            resolve();
          }, ms),
          cancel: () => {
            clearTimeout(entry.timer);
            state.timers.delete(entry);
            reject(new Error("slow tool cancelled"));
          },
        };
        const onAbort = (): void => entry.cancel();
        state.timers.add(entry);
        if (extra.signal.aborted) entry.cancel();
        else extra.signal.addEventListener("abort", onAbort, { once: true });
      });
      const result = { waited: ms };
      return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
    },
  );

  return server;
}

// ---------------------------------------------------------------------------
// HTTP plumbing shared by the three variants
// ---------------------------------------------------------------------------

type AuthDecision =
  | { ok: true; authInfo?: AuthInfo }
  | { ok: false; status: number; headers: Record<string, string>; body: string };

interface HttpServerSetup {
  port: number | undefined;
  redirect?: CustomerMcpOptions["redirect"];
  authenticate(req: IncomingMessage, mcpUrl: string): Promise<AuthDecision>;
  /** Extra routes (metadata); return true when handled. */
  extraRoute?(req: IncomingMessage, res: ServerResponse, path: string, mcpUrl: string): boolean;
}

interface RunningServer {
  base: string;
  mcp: CustomerMcp;
}

function sendJsonRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}

async function serveMcp(
  req: IncomingMessage & { auth?: AuthInfo },
  res: ServerResponse,
  state: ToolState,
  body: unknown,
): Promise<void> {
  if (req.method !== "POST") {
    res.setHeader("allow", "POST");
    sendJsonRpcError(res, 405, -32000, "Method not allowed.");
    return;
  }
  const server = buildMcpServer(state);
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  res.on("close", () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

// A POST body as JSON, or undefined when it is not JSON.
async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return undefined;
  }
}

type RpcMessage = { method?: unknown; params?: { name?: unknown; _meta?: Record<string, unknown> } } | null;

function toolCallsIn(messages: RpcMessage[]): ToolCallRequest[] {
  return messages
    .filter((m) => m?.method === "tools/call")
    .map((m) => ({ name: String(m!.params?.name), meta: m!.params?._meta }));
}

async function startHttp(setup: HttpServerSetup): Promise<RunningServer> {
  const state: ToolState = { calls: [], tracked: [], held: [], timers: new Set(), keyGates: new Map() };
  let requests = 0;
  const traceparents: string[] = [];
  const log: LoggedRequest[] = [];
  const toolCallRequests: ToolCallRequest[] = [];
  let authorized = 0;
  let redirects = 0;
  let failing = 0;
  let failingMethod: string | undefined;
  let mcpUrl = "";

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    if (setup.extraRoute?.(req, res, path, mcpUrl)) return;
    if (path !== MCP_PATH) {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("Not Found");
      return;
    }
    requests += 1;
    traceparents.push(String(req.headers.traceparent ?? ""));
    // Read here (and handed to the transport) so that tool calls are seen
    // even when refused or failed before the SDK server parses them.
    const body = req.method === "POST" ? await readJson(req) : undefined;
    const messages = (Array.isArray(body) ? body : body === undefined ? [] : [body]) as RpcMessage[];
    log.push({ httpMethod: req.method ?? "", rpcMethods: messages.map((m) => String(m?.method ?? "")), headers: { ...req.headers } });
    if (req.method === "POST" && body === undefined) {
      sendJsonRpcError(res, 400, -32700, "Parse error");
      return;
    }
    toolCallRequests.push(...toolCallsIn(messages));
    const decision = await setup.authenticate(req, mcpUrl);
    if (!decision.ok) {
      res.writeHead(decision.status, decision.headers);
      res.end(decision.body);
      return;
    }
    authorized += 1;
    if (setup.redirect && req.method === setup.redirect.method) {
      redirects += 1;
      res.writeHead(setup.redirect.status ?? (req.method === "GET" ? 302 : 307), { location: setup.redirect.to }).end();
      return;
    }
    if (failing > 0 && req.method === "POST" && (failingMethod === undefined || messages.some((m) => m?.method === failingMethod))) {
      failing -= 1;
      res.writeHead(503, { "content-type": "text/plain" }).end("Service Unavailable");
      return;
    }
    const authedReq: IncomingMessage & { auth?: AuthInfo } = req;
    if (decision.authInfo !== undefined) authedReq.auth = decision.authInfo;
    await serveMcp(authedReq, res, state, body);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        sendJsonRpcError(res, 500, -32603, `Internal error: ${String(err)}`);
      } else {
        res.destroy();
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(setup.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  mcpUrl = `${base}${MCP_PATH}`;

  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= new Promise<void>((resolve, reject) => {
      for (const entry of [...state.timers]) entry.cancel();
      server.close((err) => (err ? reject(err) : resolve()));
      server.closeAllConnections();
    });
    return closed;
  };

  return {
    base,
    mcp: {
      url: mcpUrl,
      requests: () => requests,
      traceparents: () => [...traceparents],
      requestLog: () => log.map((r) => ({ ...r, headers: { ...r.headers } })),
      toolCallRequests: () => toolCallRequests.map((c) => ({ ...c })),
      authorizedRequests: () => authorized,
      toolCalls: () => state.calls.map((c) => ({ ...c })),
      trackedCalls: () => state.tracked.map((c) => ({ ...c })),
      holdTrack: () => {
        let release!: () => void;
        state.trackGate = new Promise<void>((resolve) => (release = resolve));
        return () => {
          state.trackGate = undefined;
          release();
        };
      },
      heldTrackKeys: () => [...state.held],
      holdTrackKey: (key) => {
        let release!: () => void;
        state.keyGates.set(key, new Promise<void>((resolve) => (release = resolve)));
        return () => {
          state.keyGates.delete(key);
          release();
        };
      },
      redirects: () => redirects,
      failNext: (n, method) => {
        failing = n;
        failingMethod = method;
      },
      close,
    },
  };
}

// ---------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------

/** A customer MCP server without authentication. */
export async function startOpenMcp(opts: CustomerMcpOptions = {}): Promise<CustomerMcp> {
  const { mcp } = await startHttp({ port: opts.port, redirect: opts.redirect, authenticate: async () => ({ ok: true }) });
  return mcp;
}

/**
 * A customer MCP server that compares `Authorization: Bearer <token>` on every
 * request (scheme case-insensitive, token exact). Mismatch or missing header:
 * 401, content-type application/json, body STATIC_UNAUTHORIZED_BODY, and no
 * WWW-Authenticate header.
 */
export async function startStaticBearerMcp(
  token: string,
  opts: CustomerMcpOptions = {},
): Promise<CustomerMcp> {
  const { mcp } = await startHttp({
    port: opts.port,
    redirect: opts.redirect,
    authenticate: async (req) => {
      const match = /^Bearer (.+)$/i.exec(req.headers.authorization ?? "");
      if (match?.[1] === token) return { ok: true };
      return {
        ok: false,
        status: 401,
        headers: { "content-type": "application/json" },
        body: STATIC_UNAUTHORIZED_BODY,
      };
    },
  });
  return mcp;
}

export interface HeadersMcpOptions extends CustomerMcpOptions {
  /** The 401's JSON-RPC message quotes the headers it got, as a careless server's might. */
  quoteRefused?: boolean;
}

/**
 * A customer MCP server that wants every one of `expected` (name → exact
 * value) on every request: an API key header, `Authorization: Basic …`.
 * A missing or different one: 401 with STATIC_UNAUTHORIZED_BODY (or, with
 * quoteRefused, a -32000 error whose message quotes what was sent).
 */
export async function startHeadersMcp(expected: Record<string, string>, opts: HeadersMcpOptions = {}): Promise<CustomerMcp> {
  const { mcp } = await startHttp({
    port: opts.port,
    redirect: opts.redirect,
    authenticate: async (req) => {
      const wrong = Object.entries(expected).filter(([name, value]) => req.headers[name.toLowerCase()] !== value);
      if (!wrong.length) return { ok: true };
      const quoted = wrong.map(([name]) => `${name}=${String(req.headers[name.toLowerCase()] ?? "")}`).join(", ");
      return {
        ok: false,
        status: 401,
        headers: { "content-type": "application/json" },
        body: opts.quoteRefused
          ? JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: `Unauthorized: ${quoted}` }, id: null })
          : STATIC_UNAUTHORIZED_BODY,
      };
    },
  });
  return mcp;
}

/**
 * An OAuth-protected customer MCP server (seed 5.2, OAuth-protected mode).
 *
 * - No / malformed Authorization header: 401,
 *   `WWW-Authenticate: Bearer resource_metadata="<metadataUrl>", error="invalid_token"`,
 *   text/plain body "Missing Authorization header" (or "Invalid Authorization header …").
 * - Token fails verification (signature, iss, aud, exp, not a JWT): 401 with
 *   the same challenge plus `, error_description="…"`, text/plain body.
 * - Valid token without requiredScope: 403,
 *   `WWW-Authenticate: Bearer error="insufficient_scope", scope="<requiredScope>"`.
 * With challengeWithoutMetadataUrl the resource_metadata parameter is left out.
 */
export async function startOAuthMcp(opts: OAuthMcpOptions): Promise<OAuthCustomerMcp> {
  const jwks = createRemoteJWKSet(new URL(opts.jwksUrl));
  const metadataPath = opts.metadataPath === "rfc9728" ? RFC9728_METADATA_PATH : SEED_METADATA_PATH;
  let metadataUrl = "";
  let metadataRequests = 0;

  const challenge401 = (description?: string): string => {
    const parts = ["Bearer"];
    const params: string[] = [];
    if (!opts.challengeWithoutMetadataUrl) params.push(`resource_metadata="${metadataUrl}"`);
    params.push('error="invalid_token"');
    if (description !== undefined) params.push(`error_description="${description.replace(/["\\]/g, "")}"`);
    parts.push(params.join(", "));
    return parts.join(" ");
  };
  const reject401 = (body: string, description?: string): AuthDecision => ({
    ok: false,
    status: 401,
    headers: {
      "www-authenticate": challenge401(description),
      "content-type": "text/plain; charset=utf-8",
    },
    body,
  });

  const { base, mcp } = await startHttp({
    port: opts.port,
    redirect: opts.redirect,
    extraRoute: (req, res, path, mcpUrl) => {
      if (path !== metadataPath) return false;
      metadataRequests += 1;
      if (req.method !== "GET" && req.method !== "HEAD") {
        res.writeHead(405, { allow: "GET" });
        res.end();
        return true;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          resource: opts.advertisedResource ?? mcpUrl,
          authorization_servers: [opts.advertisedIssuer ?? opts.issuer],
          scopes_supported: [opts.requiredScope],
          bearer_methods_supported: ["header"],
        }),
      );
      return true;
    },
    authenticate: async (req, mcpUrl) => {
      const header = req.headers.authorization;
      if (header === undefined || header === "") {
        return reject401("Missing Authorization header");
      }
      const match = /^Bearer ([^\s]+)$/i.exec(header);
      if (match?.[1] === undefined) {
        return reject401(
          "Invalid Authorization header format, expected 'Bearer TOKEN'",
          "Invalid Authorization header format",
        );
      }
      let payload;
      try {
        ({ payload } = await jwtVerify(match[1], jwks, {
          issuer: opts.issuer,
          audience: mcpUrl,
          requiredClaims: ["exp"],
        }));
      } catch (err) {
        const description =
          err instanceof joseErrors.JOSEError ? `${err.code}: ${err.message}` : "invalid token";
        return reject401(`Invalid access token: ${description}`, description);
      }
      const scopes = typeof payload.scope === "string" ? payload.scope.split(" ").filter(Boolean) : [];
      if (!scopes.includes(opts.requiredScope)) {
        return {
          ok: false,
          status: 403,
          headers: {
            "www-authenticate": `Bearer error="insufficient_scope", scope="${opts.requiredScope}"`,
            "content-type": "text/plain; charset=utf-8",
          },
          body: `Insufficient scope: ${opts.requiredScope} required`,
        };
      }
      const clientId =
        typeof payload.client_id === "string" ? payload.client_id : (payload.sub ?? "unknown");
      return {
        ok: true,
        authInfo: {
          token: match[1],
          clientId,
          scopes,
          ...(payload.exp !== undefined ? { expiresAt: payload.exp } : {}),
          resource: new URL(mcpUrl),
          extra: { iss: payload.iss, sub: payload.sub },
        },
      };
    },
  });
  metadataUrl = `${base}${metadataPath}`;
  return { ...mcp, metadataUrl, metadataRequests: () => metadataRequests };
}
