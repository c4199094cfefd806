// A minimal OAuth-protected MCP server for the skills bench, with its own
// authorization server on the same origin (bench/ cannot import test/, so this
// is a small, self-contained version of test/support/customer-mcp.ts):
//
//   GET  /mcp/.well-known/oauth-protected-resource   RFC 9728 metadata
//   GET  /.well-known/oauth-authorization-server      RFC 8414 metadata
//   POST /token                                       client_credentials, Basic auth
//   POST /mcp                                         stateless Streamable HTTP MCP
//
// Every POST /mcp verifies its bearer JWT with jose (RS256 signature, iss,
// aud = <origin>/mcp, exp, scope) before the MCP server sees it; there is no
// verification cache, so each request pays the same verification whichever
// client sent it. Tokens are RS256 JWTs valid for one hour.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SignJWT, errors as joseErrors, generateKeyPair, jwtVerify } from "jose";
// zod is the MCP SDK's peer dependency (hoisted), not a direct one of the
// project; McpServer.registerTool takes zod shapes.
import * as z from "zod";

export const CLIENT_ID = "bench";
export const CLIENT_SECRET = "bench-secret";
export const SCOPE = "mcp:bench";

const MCP_PATH = "/mcp";
const RESOURCE_METADATA_PATH = "/mcp/.well-known/oauth-protected-resource";
const AS_METADATA_PATH = "/.well-known/oauth-authorization-server";
const TOKEN_PATH = "/token";
const TOKEN_LIFETIME_SECONDS = 3600;

export interface BenchMcpServer {
  /** http://127.0.0.1:PORT (the issuer, exactly as the metadata names it) */
  issuer: string;
  /** http://127.0.0.1:PORT/mcp (the resource, and the tokens' audience) */
  mcpUrl: string;
  tokenEndpoint: string;
  resourceMetadataUrl: string;
  counters: {
    /** Token responses issued (200). */
    tokensIssued: number;
    /** Requests to the token endpoint, whatever the answer. */
    tokenRequests: number;
    /** Requests to /mcp, whatever the answer. */
    mcpRequests: number;
    /** Requests to /mcp refused with 401 (no token, or a token that did not verify). */
    mcpUnauthorized: number;
    /** Requests to /mcp answered by the MCP server after a verified token. */
    mcpAuthorized: number;
    /** Calls that reached the echo tool. */
    echoCalls: number;
  };
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", ...headers });
  res.end(JSON.stringify(body));
}

// RFC 6749 §2.3.1: client id and secret are form-urlencoded inside Basic.
function basicCredentials(header: string | undefined): { id: string; secret: string } | undefined {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header ?? "");
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) return undefined;
  const dec = (s: string) => decodeURIComponent(s.replace(/\+/g, " "));
  try {
    return { id: dec(decoded.slice(0, colon)), secret: dec(decoded.slice(colon + 1)) };
  } catch {
    return undefined;
  }
}

export async function startBenchMcpServer(): Promise<BenchMcpServer> {
  const { publicKey, privateKey } = await generateKeyPair("RS256");
  const counters: BenchMcpServer["counters"] = {
    tokensIssued: 0,
    tokenRequests: 0,
    mcpRequests: 0,
    mcpUnauthorized: 0,
    mcpAuthorized: 0,
    echoCalls: 0,
  };
  // Set once listening; no request can arrive before.
  let issuer = "";
  let mcpUrl = "";
  let resourceMetadataUrl = "";

  const challenge = (description?: string): string =>
    `Bearer resource_metadata="${resourceMetadataUrl}", error="invalid_token"` +
    (description ? `, error_description="${description.replace(/["\\]/g, "")}"` : "");

  const unauthorized = (res: ServerResponse, description?: string): void => {
    counters.mcpUnauthorized++;
    res.writeHead(401, { "www-authenticate": challenge(description), "content-type": "text/plain; charset=utf-8" });
    res.end(description ?? "Missing Authorization header");
  };

  // Stateless MCP: a fresh server and transport per request (the SDK does not
  // let a stateless transport serve a second request).
  const mcpServer = (): McpServer => {
    const server = new McpServer({ name: "bench-mcp", version: "1.0.0" });
    server.registerTool(
      "echo",
      { description: "Echoes the text back.", inputSchema: { text: z.string() } },
      ({ text }): CallToolResult => {
        counters.echoCalls++;
        return { content: [{ type: "text", text }] };
      },
    );
    return server;
  };

  async function token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    counters.tokenRequests++;
    if (req.method !== "POST") return sendJson(res, 405, { error: "invalid_request" }, { allow: "POST" });
    const client = basicCredentials(req.headers.authorization);
    if (client?.id !== CLIENT_ID || client.secret !== CLIENT_SECRET)
      return sendJson(res, 401, { error: "invalid_client" }, { "www-authenticate": 'Basic realm="bench"' });
    const form = new URLSearchParams(await readBody(req));
    if (form.get("grant_type") !== "client_credentials") return sendJson(res, 400, { error: "unsupported_grant_type" });
    const resource = form.get("resource");
    if (resource !== null && resource !== mcpUrl) return sendJson(res, 400, { error: "invalid_target" });
    const requested = (form.get("scope") ?? SCOPE).split(" ").filter(Boolean);
    if (requested.some((s) => s !== SCOPE)) return sendJson(res, 400, { error: "invalid_scope" });
    const scope = SCOPE;
    const accessToken = await new SignJWT({ scope, client_id: CLIENT_ID })
      .setProtectedHeader({ alg: "RS256", typ: "at+jwt" })
      .setIssuer(issuer)
      .setAudience(mcpUrl)
      .setSubject(CLIENT_ID)
      .setIssuedAt()
      .setExpirationTime(`${TOKEN_LIFETIME_SECONDS}s`)
      .sign(privateKey);
    counters.tokensIssued++;
    sendJson(res, 200, { access_token: accessToken, token_type: "Bearer", expires_in: TOKEN_LIFETIME_SECONDS, scope });
  }

  async function mcp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    counters.mcpRequests++;
    const m = /^Bearer ([^\s]+)$/i.exec(req.headers.authorization ?? "");
    if (!m) return unauthorized(res);
    let scopes: string[];
    try {
      const { payload } = await jwtVerify(m[1]!, publicKey, {
        issuer,
        audience: mcpUrl,
        algorithms: ["RS256"],
        requiredClaims: ["exp"],
      });
      scopes = typeof payload.scope === "string" ? payload.scope.split(" ") : [];
    } catch (err) {
      return unauthorized(res, err instanceof joseErrors.JOSEError ? err.code : "invalid token");
    }
    if (!scopes.includes(SCOPE)) {
      res.writeHead(403, { "www-authenticate": `Bearer error="insufficient_scope", scope="${SCOPE}"`, "content-type": "text/plain" });
      res.end(`${SCOPE} required`);
      return;
    }
    counters.mcpAuthorized++;
    if (req.method !== "POST") {
      // What the SDK client expects from a stateless server when it tries to
      // open the standalone SSE stream (GET) or end a session (DELETE).
      return sendJson(res, 405, { jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed." }, id: null }, { allow: "POST" });
    }
    const server = mcpServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  }

  const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void | Promise<void>> = {
    [RESOURCE_METADATA_PATH]: (_req, res) =>
      sendJson(res, 200, { resource: mcpUrl, authorization_servers: [issuer], scopes_supported: [SCOPE], bearer_methods_supported: ["header"] }),
    [AS_METADATA_PATH]: (_req, res) =>
      sendJson(res, 200, {
        issuer,
        token_endpoint: issuer + TOKEN_PATH,
        grant_types_supported: ["client_credentials"],
        token_endpoint_auth_methods_supported: ["client_secret_basic"],
        scopes_supported: [SCOPE],
      }),
    [TOKEN_PATH]: token,
    [MCP_PATH]: mcp,
  };

  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const route = routes[path];
    if (!route) return sendJson(res, 404, { error: "not_found" });
    Promise.resolve(route(req, res)).catch((err: unknown) => {
      if (res.headersSent) res.destroy();
      else sendJson(res, 500, { jsonrpc: "2.0", error: { code: -32603, message: `Internal error: ${String(err)}` }, id: null });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  issuer = `http://127.0.0.1:${port}`;
  mcpUrl = issuer + MCP_PATH;
  resourceMetadataUrl = issuer + RESOURCE_METADATA_PATH;

  return {
    issuer,
    mcpUrl,
    tokenEndpoint: issuer + TOKEN_PATH,
    resourceMetadataUrl,
    counters,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
