// Skill tool-call latency: agentplane's MCP client against the MCP SDK client
// called directly, on the same local OAuth-protected MCP server.
//
// One process starts an OAuth-protected MCP server with its own authorization
// server on 127.0.0.1 (./oauth-mcp-server.ts) and two clients of it:
//   agentplane: createSkillPool (outbound guard: address policy, undici Agent
//       with a checked DNS lookup, response size limit) → pool.client (OAuth
//       discovery, client_credentials token, cached) → SkillClient.callTool;
//   direct: the SDK Client over StreamableHTTPClientTransport with a fixed
//       `Authorization: Bearer <token>` header (one token fetched up front):
//       no guard, no auth logic.
// Both call the tool "echo" sequentially, one call in flight at a time, in
// alternating blocks, and per-call latency is compared against the target
// "agentplane p50 and p99 <= 1.2x direct". Agentplane must also make exactly
// one token request in the whole run. It reports; it exits nonzero only when
// a call fails or returns something other than its text.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { SkillClient } from "../../src/integrations/mcp-client/skill-client.js";
import type { SkillPool } from "../../src/integrations/mcp-client/skill-pool.js";
import { createOutboundFetch } from "../../src/integrations/outbound/outbound.js";
import { createSkillPool } from "../../src/integrations/skill-pool-factory.js";
import { positiveInt } from "../lib/env.js";
import { describeHost, runBench } from "../lib/run.js";
import { mean } from "../lib/stats.js";
import { printTable } from "../lib/table.js";
import { CLIENT_ID, CLIENT_SECRET, SCOPE, startBenchMcpServer, type BenchMcpServer } from "./oauth-mcp-server.js";

const CALL_TIMEOUT_MS = 30_000;
const TARGET_RATIO = 1.2;
const TARGET_TOKEN_REQUESTS = 1;

interface Contender {
  name: string;
  call(text: string): Promise<CallToolResult>;
  samples: number[]; // ms, measured calls only
  blockP50s: number[];
}

class CallFailed extends Error {
  override name = "CallFailed";
}

// The one thing every call must return: its own text, as the only content.
function check(name: string, text: string, result: CallToolResult): void {
  const [first, ...rest] = result.content ?? [];
  if (result.isError || rest.length > 0 || first?.type !== "text" || first.text !== text)
    throw new CallFailed(`${name}: echo("${text}") returned ${JSON.stringify(result).slice(0, 300)}`);
}

let sequence = 0;

// `count` sequential calls; each call's own wall time, from before the call to
// its awaited result, in ms. The result is checked after the clock stops.
async function block(c: Contender, count: number, record: boolean): Promise<void> {
  const local: number[] = [];
  for (let i = 0; i < count; i++) {
    const text = `bench-${++sequence}`;
    let result: CallToolResult;
    const t0 = process.hrtime.bigint();
    try {
      result = await c.call(text);
    } catch (err) {
      throw new CallFailed(`${c.name}: echo("${text}") threw ${err instanceof Error ? err.message : String(err)}`);
    }
    const t1 = process.hrtime.bigint();
    check(c.name, text, result);
    local.push(Number(t1 - t0) / 1e6);
  }
  if (record) {
    c.samples.push(...local);
    c.blockP50s.push(percentile(sorted(local), 50));
  }
}

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
// Nearest rank: the smallest sample with at least p % of the samples at or below it.
const percentile = (s: number[], p: number): number => s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)]!;

interface Summary {
  name: string;
  calls: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  max: number;
  blocks: number[];
}

function summarize(c: Contender): Summary {
  const s = sorted(c.samples);
  return {
    name: c.name,
    calls: s.length,
    p50: percentile(s, 50),
    p90: percentile(s, 90),
    p99: percentile(s, 99),
    mean: mean(s),
    max: s[s.length - 1]!,
    blocks: c.blockP50s,
  };
}

function printSummaries(rows: Summary[]): void {
  const header = ["client", "calls", "p50 (ms)", "p90 (ms)", "p99 (ms)", "mean (ms)", "max (ms)", "p50 per block (ms)"];
  const ms = (x: number) => x.toFixed(3);
  const cells = rows.map((r) => [r.name, String(r.calls), ms(r.p50), ms(r.p90), ms(r.p99), ms(r.mean), ms(r.max), r.blocks.map((b) => b.toFixed(2)).join(" ")]);
  // Names and the list of block p50s read left to right.
  printTable(header, cells, [0, header.length - 1]);
}

// One token from the token endpoint, the way any OAuth client would get it.
async function fetchToken(server: BenchMcpServer): Promise<string> {
  const res = await fetch(server.tokenEndpoint, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: "Basic " + Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString("base64"),
    },
    body: new URLSearchParams({ grant_type: "client_credentials", scope: SCOPE, resource: server.mcpUrl }),
  });
  const body = (await res.json()) as { access_token?: unknown };
  if (res.status !== 200 || typeof body.access_token !== "string") throw new Error(`token endpoint answered ${res.status}: ${JSON.stringify(body)}`);
  return body.access_token;
}

// Before anything is measured: the server really refuses a request without a
// token, with the challenge agentplane's discovery starts from, and one with a
// token it cannot verify.
async function preflight(server: BenchMcpServer): Promise<void> {
  const init = (authorization?: string): RequestInit => ({
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(authorization ? { authorization } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  });
  const bare = await fetch(server.mcpUrl, init());
  await bare.arrayBuffer();
  const expected = `Bearer resource_metadata="${server.resourceMetadataUrl}", error="invalid_token"`;
  if (bare.status !== 401 || bare.headers.get("www-authenticate") !== expected)
    throw new Error(`no token: expected 401 with ${expected}, got ${bare.status} ${bare.headers.get("www-authenticate")}`);
  const forged = await fetch(server.mcpUrl, init("Bearer not-a-jwt"));
  await forged.arrayBuffer();
  if (forged.status !== 401) throw new Error(`an unverifiable token got ${forged.status}, expected 401`);
}

async function main(): Promise<void> {
  const warmup = positiveInt("BENCH_WARMUP", 200);
  const calls = positiveInt("BENCH_CALLS", 2000);
  const blockSize = positiveInt("BENCH_BLOCK", 250);
  if (calls % blockSize !== 0) throw new Error(`BENCH_CALLS (${calls}) must be a multiple of BENCH_BLOCK (${blockSize})`);

  const server = await startBenchMcpServer();
  let pool: SkillPool | undefined;
  let direct: Client | undefined;
  try {
    await preflight(server);

    // agentplane, exactly as the runtime builds it (loopback allowed for the bench).
    pool = createSkillPool(createOutboundFetch({ allow: ["127.0.0.0/8"], maxResponseBytes: 4 << 20 }), { discoveryTimeoutMs: 10_000, callTimeoutMs: CALL_TIMEOUT_MS });
    const skill: SkillClient = await pool.client({
      skillId: "bench",
      key: "bench@1",
      url: server.mcpUrl,
      auth: { mode: "oauth", issuer: server.issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, scopes: [SCOPE], audience: "" },
    });

    // Direct: the SDK client with a token fetched once, global fetch.
    const token = await fetchToken(server);
    direct = new Client({ name: "bench-direct", version: "1.0.0" });
    await direct.connect(
      new StreamableHTTPClientTransport(new URL(server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
      { timeout: CALL_TIMEOUT_MS },
    );
    const directClient = direct;

    // Same SDK request options on both sides (agentplane passes a timeout and an optional signal).
    const a: Contender = { name: "agentplane", call: (text) => skill.callTool("echo", { text }, `bench-${text}`), samples: [], blockP50s: [] };
    const b: Contender = {
      name: "direct (SDK)",
      call: async (text) => (await directClient.callTool({ name: "echo", arguments: { text } }, undefined, { timeout: CALL_TIMEOUT_MS })) as CallToolResult,
      samples: [],
      blockP50s: [],
    };

    const blocks = calls / blockSize;
    console.log(
      `agentplane skills bench: tools/call "echo" on an OAuth-protected MCP server (stateless Streamable HTTP, JSON responses)\n` +
        `${describeHost()}; server and both clients in this process, one call in flight\n` +
        `${warmup} warm-up calls each, then ${calls} measured calls each in ${2 * blocks} alternating blocks of ${blockSize} (agentplane first)\n`,
    );

    const tokensAfterConnect = pool.tokenRequests;
    process.stdout.write("warm-up ... ");
    await block(a, warmup, false);
    await block(b, warmup, false);
    console.log("done");

    const tokensBeforeMeasure = pool.tokenRequests;
    const unauthorizedBefore = server.counters.mcpUnauthorized;
    for (let i = 0; i < blocks; i++) {
      for (const c of [a, b]) {
        await block(c, blockSize, true);
      }
      if (process.stdout.isTTY) process.stdout.write(`\rblocks ${2 * (i + 1)}/${2 * blocks}`);
    }
    console.log(process.stdout.isTTY ? "\n" : "");

    const sa = summarize(a);
    const sb = summarize(b);
    printSummaries([sa, sb]);

    const r50 = sa.p50 / sb.p50;
    const r99 = sa.p99 / sb.p99;
    const verdict = (r: number) => (r <= TARGET_RATIO ? "met" : "NOT met");
    const tokens = pool.tokenRequests;
    console.log(
      `\nagentplane / direct: p50 ${r50.toFixed(2)}x (target <= ${TARGET_RATIO}x: ${verdict(r50)}), ` +
        `p99 ${r99.toFixed(2)}x (target <= ${TARGET_RATIO}x: ${verdict(r99)}), mean ${(sa.mean / sb.mean).toFixed(2)}x\n` +
        `agentplane token requests: ${tokens} in the whole run (${tokensAfterConnect} while connecting, ` +
        `${tokens - tokensBeforeMeasure} while measured; target ${TARGET_TOKEN_REQUESTS}: ${tokens === TARGET_TOKEN_REQUESTS ? "met" : "NOT met"})\n` +
        `server: ${server.counters.tokensIssued} tokens issued (agentplane's and the direct client's one), ` +
        `${server.counters.mcpUnauthorized - unauthorizedBefore} 401s on /mcp while measured, ` +
        `${server.counters.echoCalls} echo calls, all ${2 * (warmup + calls)} bench calls returned their text`,
    );
  } finally {
    await direct?.close().catch(() => undefined);
    await pool?.close().catch(() => undefined);
    await server.close();
  }
}

runBench(main);
