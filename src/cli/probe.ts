import { readFileSync } from "node:fs";
import { SkillError } from "../integrations/mcp-client/errors.js";
import type { TokenEndpointAuthMethod } from "../integrations/mcp-client/oauth.js";
import type { OpenedSkillAuth } from "../integrations/mcp-client/skill-pool.js";
import { createOutboundFetch, DEFAULT_OUTBOUND } from "../integrations/outbound/outbound.js";
import { createSkillPool } from "../integrations/skill-pool-factory.js";
import { importSigningKey, signingAlgOf } from "../lib/signing-keys.js";

export interface ProbeOptions {
  url: string;
  bearer?: string;
  // Header name → value (`headers` mode), already checked.
  headers?: Record<string, string>;
  issuer?: string;
  clientId?: string;
  clientSecret?: string;
  // A PEM private key (RS256 or ES256) for private_key_jwt.
  privateKeyFile?: string;
  authMethod?: TokenEndpointAuthMethod;
  scopes: string[];
  audience?: string;
  allow: string[];
}

// The key pair as the runtime holds a skill's: PKCS#8, with the kid of its
// public JWK (the RFC 7638 thumbprint, as agentplane generates it).
async function privateKeyOf(file: string): Promise<{ pem: string; alg: "RS256" | "ES256"; kid: string }> {
  const pem = readFileSync(file, "utf8");
  const alg = signingAlgOf(pem) ?? "RS256";
  const imported = await importSigningKey(pem, alg);
  if (typeof imported === "string") throw new Error(`--private-key-file ${imported}`);
  console.log(`private_key_jwt: ${alg} key, kid ${String(imported.publicJwk.kid)}; its public JWK: ${JSON.stringify(imported.publicJwk)}`);
  return { pem: imported.privateKeyPem, alg, kid: String(imported.publicJwk.kid) };
}

// Connects to an MCP server as the runtime would (same guard, same auth
// flow), lists its tools, and says precisely which step failed otherwise.
export async function probeSkill(options: ProbeOptions): Promise<number> {
  let auth: OpenedSkillAuth = { mode: "none" };
  if (options.bearer) auth = { mode: "static_bearer", token: options.bearer };
  else if (options.headers && Object.keys(options.headers).length) auth = { mode: "headers", headers: options.headers };
  else if (options.issuer || options.clientId) {
    if (!options.issuer || !options.clientId || !(options.clientSecret || options.privateKeyFile))
      throw new Error("OAuth probing needs --issuer, --client-id and --client-secret or --private-key-file");
    auth = {
      mode: "oauth",
      issuer: options.issuer,
      clientId: options.clientId,
      clientSecret: options.clientSecret,
      privateKey: options.privateKeyFile ? await privateKeyOf(options.privateKeyFile) : undefined,
      tokenEndpointAuthMethod: options.authMethod,
      scopes: options.scopes,
      audience: options.audience ?? "",
    };
  }
  const pool = createSkillPool(createOutboundFetch({ ...DEFAULT_OUTBOUND, allow: options.allow }));
  try {
    const client = await pool.connectOnce({ skillId: "probe", key: "probe", url: options.url, auth });
    const tools = await client.listTools();
    await client.close();
    console.log(`connected to ${options.url} (${auth.mode}); ${tools.length} tool(s):`);
    for (const t of tools) console.log(`  ${t.name}${t.description ? ` - ${t.description}` : ""}`);
    if (auth.mode === "oauth") console.log(`token requests: ${pool.tokenRequests}${pool.lastTokenMethod ? ` (${pool.lastTokenMethod})` : ""}`);
    return 0;
  } catch (err) {
    const e = err instanceof SkillError ? err : new SkillError("skill_error", (err as Error).message);
    console.error(`probe failed: ${e.message}`);
    return 1;
  } finally {
    await pool.close();
  }
}
