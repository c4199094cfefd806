// An MCP server (Streamable HTTP, JSON answers, no sessions) whose one tool,
// `big`, answers `{"text": "xxx…"}` of the size asked for. The answer is
// written as it is sent, each chunk once the socket took the last, so that a
// 50 MB result costs this process (the test's, which also runs the app) a
// few chunks, and what the app holds is the app's own doing. Counts the
// tools/call requests it got, to tell a retried call from one try.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Writable } from "node:stream";
import { createGzip } from "node:zlib";
import { listenOnLoopback } from "./listen.js";

export interface HostileMcp {
  url: string;
  toolCalls(): number;
  close(): Promise<void>;
}

const CHUNK = "x".repeat(64 * 1024);

async function readJson(req: IncomingMessage): Promise<{ id?: unknown; method?: string; params?: Record<string, unknown> }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8")) as never;
}

const answer = (res: ServerResponse, id: unknown, result: unknown) =>
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, result }));

// The socket (through `out`) took what was written, or the client went away.
const drained = (out: Writable, res: ServerResponse) =>
  new Promise<void>((resolve) => {
    const done = () => {
      out.off("drain", done);
      res.off("close", done);
      resolve();
    };
    out.on("drain", done);
    res.on("close", done);
  });

// `{"text": "x…"}` of `bytes` characters, as structured content and text.
// As an SSE stream (`sse`), the answer is one event's data; `gzip`: the
// answer gzip-encoded whatever the client accepts (50 MB of it is 50 KB sent).
async function big(res: ServerResponse, id: unknown, bytes: number, sse: boolean, gzip: boolean): Promise<void> {
  res.writeHead(200, { "content-type": sse ? "text/event-stream" : "application/json", ...(gzip && { "content-encoding": "gzip" }) });
  const out: Writable = gzip ? createGzip() : res;
  if (gzip) out.pipe(res);
  const head = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"structuredContent":{"text":"`;
  out.write(sse ? `event: message\ndata: ${head}` : head);
  for (let left = bytes; left > 0 && !res.destroyed; left -= CHUNK.length) {
    if (!out.write(left >= CHUNK.length ? CHUNK : CHUNK.slice(0, left))) await drained(out, res);
  }
  if (!res.destroyed) out.end(`"},"content":[{"type":"text","text":"(structured)"}]}}${sse ? "\n\n" : ""}`);
}

// `description`: the tool's, as tools/list gives it (any text a server may
// send); `sse`: tool results as an SSE stream rather than a JSON body;
// `gzip`: tool results gzip-encoded.
export async function startHostileMcp({
  description = "Answers as many bytes as asked for.",
  sse = false,
  gzip = false,
}: { description?: string; sse?: boolean; gzip?: boolean } = {}): Promise<HostileMcp> {
  let toolCalls = 0;
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method !== "POST") return void res.writeHead(405, { allow: "POST" }).end();
      const msg = await readJson(req);
      if (msg.id === undefined) return void res.writeHead(202).end();
      if (msg.method === "initialize")
        return answer(res, msg.id, { protocolVersion: msg.params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "hostile", version: "1.0.0" } });
      if (msg.method === "tools/list")
        return answer(res, msg.id, {
          tools: [{ name: "big", description, inputSchema: { type: "object", properties: { bytes: { type: "number" } } } }],
        });
      if (msg.method === "tools/call") {
        toolCalls += 1;
        const args = (msg.params?.arguments ?? {}) as { bytes?: number };
        return big(res, msg.id, args.bytes ?? 0, sse, gzip);
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "no such method" } }));
    })().catch(() => res.destroy());
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    toolCalls: () => toolCalls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
