// Run as a process of its own by test/skill-memory.test.ts, so that what Node
// prints to stderr is this process's alone: 40 tool calls in flight at once on
// one pooled client of an MCP server, then "done <n>" on stdout.
import { SkillClient } from "../../src/integrations/mcp-client/skill-client.js";
import { createOutboundFetch } from "../../src/integrations/outbound/outbound.js";
import { startOpenMcp } from "./customer-mcp.js";

const mcp = await startOpenMcp();
const fetch = createOutboundFetch({ allow: ["127.0.0.0/8"], maxResponseBytes: 1 << 20 });
const client = await SkillClient.connect({ url: mcp.url, auth: { mode: "none" }, fetch, callTimeoutMs: 10_000, version: "test" });
const results = await Promise.all(Array.from({ length: 40 }, (_, i) => client.callTool("slow", { ms: 200 }, `key-${i}`)));
await client.close();
await mcp.close();
console.log(`done ${results.length}`);
