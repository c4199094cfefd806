// The MCP servers a bench's runs call, and the step that calls each:
// - `trivial`: the cheapest server there is (trivial-mcp.ts, in the bench's
//   process), answered by hand: what agentplane costs, not the skill;
// - `hello`: the guide's hello-mcp, the MCP SDK's own server (a fresh
//   McpServer and stateless transport per request, with schema validation),
//   in a process of its own: what a customer's real server would answer.
import { spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ownChild } from "./run.js";
import { freePort } from "./serve.js";
import { startTrivialMcp } from "./trivial-mcp.js";

const ROOT = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../..");
const HELLO_MCP = join(ROOT, "docs/guide/examples/hello-mcp.mjs");

export type McpKind = "trivial" | "hello";

// How a bench's output names each.
export const MCP_NAMES: Record<McpKind, string> = { trivial: "the trivial MCP server", hello: "hello-mcp" };

export interface McpServerProcess {
  kind: McpKind;
  url: string;
  // The process that serves it (the bench's own for `trivial`).
  pid: number;
  // The plan step that calls it: a tool and its arguments' expression.
  tool: { name: string; arguments: string };
  stop(): Promise<void> | void;
}

export function mcpKind(variable: string, fallback: McpKind): McpKind {
  const kind = process.env[variable] ?? fallback;
  if (kind !== "hello" && kind !== "trivial") throw new Error(`${variable}: "hello" or "trivial", got "${kind}"`);
  return kind;
}

export async function startMcpServer(kind: McpKind): Promise<McpServerProcess> {
  if (kind === "trivial") {
    const trivial = await startTrivialMcp();
    return { kind, url: trivial.url, pid: process.pid, tool: { name: "ok", arguments: "" }, stop: () => trivial.close() };
  }
  const port = await freePort();
  const child = ownChild(spawn(process.execPath, [HELLO_MCP, String(port)], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] }));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once("data", () => resolve());
    child.once("exit", (code) => reject(new Error(`hello-mcp exited with ${code}`)));
  });
  return { kind, url: `http://127.0.0.1:${port}/mcp`, pid: child.pid!, tool: { name: "add", arguments: '{"a": event.payload.order, "b": 1}' }, stop: () => void child.kill("SIGKILL") };
}
