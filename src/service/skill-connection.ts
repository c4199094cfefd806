import type { SkillConnection } from "../integrations/mcp-client/skill-pool.js";
import type { SecretBox } from "../lib/secret-box.js";
import type { SkillRow } from "../store/rows.js";

export const skillSecretContext = (id: string) => `skill:${id}:auth`;
export const skillKeyContext = (id: string) => `skill:${id}:key`;

// How to reach a skill, with its sealed secrets opened only here, in memory.
export function skillConnection(row: SkillRow, secrets: SecretBox): SkillConnection {
  const secret = () => secrets.open(row.authSecret!, skillSecretContext(row.id));
  const auth = row.auth;
  const base = { skillId: row.id, key: `${row.id}@${row.updateTime}`, url: row.mcpUrl };
  switch (auth.mode) {
    case "none":
      return { ...base, auth: { mode: "none" } };
    case "static_bearer":
      return { ...base, auth: { mode: "static_bearer", token: secret() } };
    case "headers":
      return { ...base, auth: { mode: "headers", headers: JSON.parse(secret()) as Record<string, string> } };
    case "oauth": {
      const jwk = auth.publicJwk;
      return {
        ...base,
        auth: {
          mode: "oauth",
          issuer: auth.issuer,
          clientId: auth.clientId,
          clientSecret: row.authSecret === null ? undefined : secret(),
          privateKey:
            row.authPrivateKey === null || !jwk
              ? undefined
              : { pem: secrets.open(row.authPrivateKey, skillKeyContext(row.id)), alg: jwk.alg as "RS256" | "ES256", kid: String(jwk.kid) },
          tokenEndpointAuthMethod: auth.tokenEndpointAuthMethod,
          scopes: auth.scopes,
          audience: auth.audience,
        },
      };
    }
  }
}
