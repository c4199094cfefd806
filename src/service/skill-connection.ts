import type { SkillConnection } from "../integrations/mcp-client/skill-pool.js";
import type { SecretBox } from "../lib/secret-box.js";
import type { SkillRow } from "../store/rows.js";

export const skillSecretContext = (id: string) => `skill:${id}:auth`;

// How to reach a skill, with its sealed secret opened only here, in memory.
export function skillConnection(row: SkillRow, secrets: SecretBox): SkillConnection {
  const secret = () => secrets.open(row.authSecret!, skillSecretContext(row.id));
  const auth = row.auth;
  return {
    key: `${row.id}@${row.updateTime}`,
    url: row.mcpUrl,
    auth:
      auth.mode === "none"
        ? { mode: "none" }
        : auth.mode === "static_bearer"
          ? { mode: "static_bearer", token: secret() }
          : { mode: "oauth", issuer: auth.issuer, clientId: auth.clientId, clientSecret: secret(), scopes: auth.scopes, audience: auth.audience },
  };
}
