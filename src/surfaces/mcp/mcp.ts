import { create, toJson, type JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Access } from "../../../gen/platform/v1/options_pb.js";
import { requiredScopes, ruleOf, scopeAllows, tenantless, type CallContext, type CallerInput } from "../../service/access.js";
import type { Platform } from "../../service/platform.js";
import { callerFromHeaders, nodeHeaderGetter } from "../http/caller.js";
import { errorAnswer } from "../http/errors.js";
import { decodeArguments, invalidCallParams, JSON_RPC, jsonRpcBodies, jsonRpcError } from "./mcp-json-rpc.js";
import { derivePlatformTools } from "./mcp-tools.js";

export const MCP_SCOPES = ["mcp:platform.read", "mcp:platform.write", "mcp:platform"];

export interface McpSurfaceOptions {
  platform: Platform;
  // Base URL callers use; the resource is `<publicUrl>/mcp`.
  publicUrl: string;
  // Issuers advertised in the protected resource metadata (RFC 9728).
  authorizationServers: string[];
  version: string;
}

interface JsonRpcMessage {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: { name?: unknown };
}


// The platform MCP endpoint: stateless Streamable HTTP (a new SDK server and
// transport per request, tools derived once), so any replica answers any
// request. Authentication and tenant standing are settled before the SDK
// sees the request; every tool call then runs the same platform
// implementation as Connect, authorized again for the MCP surface.
export async function mcpSurface(app: FastifyInstance, options: McpSurfaceOptions): Promise<void> {
  const { platform, publicUrl } = options;
  const tools = derivePlatformTools(platform.service);
  const byName = new Map(tools.map((t) => [t.name, t]));
  const resourceMetadataUrl = `${publicUrl}/.well-known/oauth-protected-resource/mcp`;
  const metadata = {
    resource: `${publicUrl}/mcp`,
    authorization_servers: options.authorizationServers,
    scopes_supported: MCP_SCOPES,
    bearer_methods_supported: ["header"],
    resource_name: "agentplane platform",
  };
  const publicHost = new URL(publicUrl).host;
  // What the first challenge asks a client to sign in with: read and write.
  // The role in the tenant decides what the person may do (a viewer lists no
  // write tool and is refused writes); asking for read only would leave every
  // interactive client (the README promises them writes) to step up at its
  // first write, which MCP SDK clients holding a refresh token cannot do.
  const signInScopes = [false, true].map((write) => requiredScopes("mcp", { write, access: Access.UNSPECIFIED })[0]!).join(" ");
  jsonRpcBodies(app);

  // RFC 9728 path-inserted form, and the form the specification names;
  // readable cross-origin, as browser MCP clients (the Inspector) fetch it.
  const prm = async (_req: FastifyRequest, reply: FastifyReply) => reply.header("access-control-allow-origin", "*").send(metadata);
  app.get("/.well-known/oauth-protected-resource/mcp", prm);
  app.get("/mcp/.well-known/oauth-protected-resource", prm);

  const notAllowed = async (_req: FastifyRequest, reply: FastifyReply) =>
    jsonRpcError(reply.header("allow", "POST"), 405, "this endpoint is stateless: use POST (no SSE stream, no sessions)", JSON_RPC.unauthorized);
  app.get("/mcp", notAllowed);
  app.delete("/mcp", notAllowed);

  app.post("/mcp", async (req, reply) => {
    if (req.body === undefined) return jsonRpcError(reply, 400, "Invalid Request: the body is empty");
    const query = req.query as { tenant?: string };
    const input: CallerInput = callerFromHeaders(nodeHeaderGetter(req.headers), query.tenant || undefined, req);
    let call: CallContext;
    try {
      call = await platform.standing(input, "mcp");
    } catch (err) {
      const refused = errorAnswer(err);
      if (refused.code === Code.Unauthenticated) {
        // No credentials: the challenge carries no error code (RFC 6750
        // §3.1), only where to learn how to get a token and the scopes to
        // ask for.
        const error = input.token ? ', error="invalid_token"' : "";
        reply.header("www-authenticate", `Bearer resource_metadata="${resourceMetadataUrl}"${error}, scope="${signInScopes}"`);
      }
      if (refused.unexpected) app.log.error({ err }, "MCP request failed");
      const code = refused.code === Code.Unauthenticated ? JSON_RPC.unauthorized : JSON_RPC.invalidRequest;
      return jsonRpcError(reply.headers(refused.headers), refused.status, `${refused.name}: ${refused.message}`, code);
    }

    const messages = (Array.isArray(req.body) ? req.body : [req.body]) as JsonRpcMessage[];
    // Per tools/call: a malformed one is -32602; one the token's scopes do
    // not cover is 403 with the scope to step up to.
    const header = req.headers["mcp-protocol-version"];
    const version = Array.isArray(header) ? header[0] : header;
    for (const m of messages) {
      if (m?.method !== "tools/call") continue;
      const invalid = invalidCallParams(m.params, (name) => byName.get(name)?.method.input, version);
      if (invalid) return jsonRpcError(reply, 200, `Invalid params: ${invalid}`, JSON_RPC.invalidParams, m.id ?? null);
      const tool = byName.get(m.params!.name as string)!;
      if (!call.tenant && !tenantless(ruleOf(tool.method)))
        return jsonRpcError(reply, 400, `invalid_argument: X-Platform-Tenant: ${tool.name} needs a tenant (?tenant=<slug>)`, JSON_RPC.invalidRequest, m.id ?? null);
      if (!scopeAllows(call.principal, "mcp", ruleOf(tool.method))) {
        const scopes = requiredScopes("mcp", ruleOf(tool.method));
        reply.header(
          "www-authenticate",
          `Bearer error="insufficient_scope", scope="${stepUpScopes(call.principal.scopes, scopes[0]!)}", resource_metadata="${resourceMetadataUrl}"`,
        );
        return jsonRpcError(reply, 403, `insufficient_scope: ${tool.name} needs ${scopes.join(" or ")}`, JSON_RPC.unauthorized, m.id ?? null);
      }
    }

    const server = new Server({ name: "agentplane", version: options.version }, { capabilities: { tools: { listChanged: false } } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: tools.filter((t) => platform.allows(call, t.method)).map((t) => t.definition),
    }));
    server.setRequestHandler(CallToolRequestSchema, async ({ params }): Promise<CallToolResult> => {
      const tool = byName.get(params.name);
      if (!tool) throw new McpError(ErrorCode.InvalidParams, `unknown tool "${params.name}"`);
      try {
        const decoded = decodeArguments(tool.method.input, params.arguments);
        if ("reason" in decoded) throw new ConnectError(decoded.reason, Code.InvalidArgument);
        const request = decoded.request;
        const result = await platform.invoke(tool.method, request, input, "mcp");
        const output = toJson(tool.method.output, create(tool.method.output, result as never)) as JsonObject; // `result` is the handler's init shape for this output
        return { content: [{ type: "text", text: JSON.stringify(output) }], structuredContent: output };
      } catch (err) {
        // A tool's failure is a result the model reads, in an HTTP 200; what
        // the error says for HTTP (`Retry-After`) goes on that answer and,
        // for the model, into the result.
        const refused = errorAnswer(err);
        if (refused.unexpected) app.log.error({ err, tool: tool.name }, "MCP tool failed");
        for (const [name, value] of Object.entries(refused.headers)) reply.raw.setHeader(name, value);
        const said = Object.entries(refused.headers).map(([name, value]) => [name.replaceAll("-", "_"), value]);
        const error = { code: refused.name, message: refused.message, ...Object.fromEntries(said) };
        return { isError: true, content: [{ type: "text", text: `${error.code}: ${error.message}` }], structuredContent: { error } };
      }
    });

    const port = req.socket.localPort;
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      // DNS rebinding protection (off by default in the SDK).
      enableDnsRebindingProtection: true,
      allowedHosts: [publicHost, `localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`],
      allowedOrigins: [new URL(publicUrl).origin, `http://localhost:${port}`, `http://127.0.0.1:${port}`],
    });
    reply.hijack();
    reply.raw.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req.raw, reply.raw, req.body);
  });
}

// The scope a step-up asks for (MCP 2025-11-25, scope challenge handling):
// the one the call needs, after the MCP scopes the token already has, since
// clients ask for exactly the challenge's scopes and would otherwise trade
// read for write.
function stepUpScopes(held: ReadonlySet<string>, needed: string): string {
  return [...new Set([...MCP_SCOPES.filter((s) => held.has(s)), needed])].join(" ");
}
