import { SkillError } from "../integrations/mcp-client/errors.js";
import type { SkillAuthConfig } from "../integrations/mcp-client/skill-pool.js";
import { createOutboundFetch, DEFAULT_OUTBOUND } from "../integrations/outbound/outbound.js";
import { createSkillPool } from "../integrations/skill-pool-factory.js";

export interface ProbeOptions {
  url: string;
  bearer?: string;
  issuer?: string;
  clientId?: string;
  clientSecret?: string;
  scopes: string[];
  audience?: string;
  allow: string[];
}

// Connects to an MCP server as the runtime would (same guard, same auth
// flow), lists its tools, and says precisely which step failed otherwise.
export async function probeSkill(options: ProbeOptions): Promise<number> {
  let auth: SkillAuthConfig = { mode: "none" };
  if (options.bearer) auth = { mode: "static_bearer", token: options.bearer };
  else if (options.issuer || options.clientId) {
    if (!options.issuer || !options.clientId || !options.clientSecret)
      throw new Error("OAuth probing needs --issuer, --client-id and --client-secret");
    auth = { mode: "oauth", issuer: options.issuer, clientId: options.clientId, clientSecret: options.clientSecret, scopes: options.scopes, audience: options.audience ?? "" };
  }
  const pool = createSkillPool(createOutboundFetch({ ...DEFAULT_OUTBOUND, allow: options.allow }));
  try {
    const client = await pool.connectOnce({ key: "probe", url: options.url, auth });
    const tools = await client.listTools();
    await client.close();
    console.log(`connected to ${options.url} (${auth.mode}); ${tools.length} tool(s):`);
    for (const t of tools) console.log(`  ${t.name}${t.description ? ` - ${t.description}` : ""}`);
    if (auth.mode === "oauth") console.log(`token requests: ${pool.tokenRequests}`);
    return 0;
  } catch (err) {
    const e = err instanceof SkillError ? err : new SkillError("skill_error", (err as Error).message);
    console.error(`probe failed: ${e.message}`);
    return 1;
  } finally {
    await pool.close();
  }
}
