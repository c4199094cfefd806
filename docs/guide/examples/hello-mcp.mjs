// A tiny MCP server to use as a skill: `node docs/guide/examples/hello-mcp.mjs [port]`
// serves Streamable HTTP at http://127.0.0.1:<port>/mcp (default: a free port;
// the first line it prints names the URL) with two
// tools, `greet` and `add`. With MCP_TOKEN set, every request must carry
// `Authorization: Bearer <MCP_TOKEN>` (the skill's `static_bearer` mode).
// It uses the MCP SDK that agentplane itself depends on; run it from the
// repository so Node finds it.
import { createServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import * as z from "zod";

const port = Number(process.argv[2] ?? 0);
const token = process.env.MCP_TOKEN;

function tools() {
  const server = new McpServer({ name: "hello-mcp", version: "1.0.0" });
  server.registerTool(
    "greet",
    { description: "Greets someone by name.", inputSchema: { name: z.string() }, outputSchema: { greeting: z.string() } },
    async ({ name }) => {
      const result = { greeting: `Hello, ${name}!` };
      return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
    },
  );
  server.registerTool(
    "add",
    { description: "Adds two numbers.", inputSchema: { a: z.number(), b: z.number() }, outputSchema: { sum: z.number() } },
    async ({ a, b }) => {
      const result = { sum: a + b };
      return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
    },
  );
  return server;
}

const jsonRpcError = (res, status, message) =>
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));

// Stateless: a fresh server and transport per request, JSON answers, no sessions.
createServer(async (req, res) => {
  if (new URL(req.url, "http://localhost").pathname !== "/mcp") return void res.writeHead(404).end();
  if (token && req.headers.authorization !== `Bearer ${token}`) return jsonRpcError(res, 401, "Unauthorized");
  if (req.method !== "POST") return jsonRpcError(res, 405, "Method not allowed.");
  const server = tools();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => void server.close());
  await server.connect(transport);
  await transport.handleRequest(req, res);
}).listen(port, "127.0.0.1", function () {
  console.log(`hello-mcp listening on http://127.0.0.1:${this.address().port}/mcp`);
});
