// The cheapest MCP server a run can call, for benches that measure agentplane
// rather than the skill: stateless Streamable HTTP answered by hand (JSON
// responses, no sessions), one tool `ok` that returns "ok". The MCP SDK's own
// server costs more per call than what it would measure here.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface TrivialMcp {
  // http://127.0.0.1:PORT/mcp
  url: string;
  calls(): number;
  close(): Promise<void>;
}

interface JsonRpcRequest {
  jsonrpc: "2.0";
  id?: number | string;
  method: string;
  params?: { protocolVersion?: string };
}

const TOOL = { name: "ok", description: "Answers ok.", inputSchema: { type: "object", properties: {} } };

function answer(req: JsonRpcRequest, count: () => void): unknown {
  switch (req.method) {
    case "initialize":
      return {
        protocolVersion: req.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "bench-trivial", version: "1.0.0" },
      };
    case "tools/list":
      return { tools: [TOOL] };
    case "tools/call":
      count();
      return { content: [{ type: "text", text: "ok" }] };
    case "ping":
      return {};
    default:
      return undefined;
  }
}

export async function startTrivialMcp(): Promise<TrivialMcp> {
  let calls = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url !== "/mcp" || req.method !== "POST") return void res.writeHead(405).end();
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const message = JSON.parse(Buffer.concat(chunks).toString("utf8")) as JsonRpcRequest;
      // Notifications (no id) get no answer.
      if (message.id === undefined) return void res.writeHead(202).end();
      const result = answer(message, () => calls++);
      const body =
        result === undefined
          ? { jsonrpc: "2.0", id: message.id, error: { code: -32601, message: `unknown method ${message.method}` } }
          : { jsonrpc: "2.0", id: message.id, result };
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls: () => calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
