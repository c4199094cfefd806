// The examples' settings, from the environment as a service would take them.
import { ClientCredentials, createPlatformClient, type PlatformClient, type Protocol } from "@agentplane/client";

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    console.error(`set ${name} (see docs/guide/calling-from-your-services.md)`);
    process.exit(2);
  }
  return value;
}

export function clientFromEnv(): PlatformClient {
  const baseUrl = required("AGENTPLANE_URL");
  const tokens = new ClientCredentials({
    clientId: required("AGENTPLANE_CLIENT_ID"),
    clientSecret: required("AGENTPLANE_CLIENT_SECRET"),
    // The token endpoint, or the issuer whose metadata names it.
    tokenEndpoint: process.env.AGENTPLANE_TOKEN_URL,
    issuer: process.env.AGENTPLANE_ISSUER ?? (process.env.AGENTPLANE_TOKEN_URL ? undefined : baseUrl),
    audience: process.env.AGENTPLANE_AUDIENCE,
    scope: process.env.AGENTPLANE_SCOPE,
  });
  return createPlatformClient({
    baseUrl,
    tenant: required("AGENTPLANE_TENANT"),
    tokens,
    protocol: (process.env.AGENTPLANE_PROTOCOL as Protocol | undefined) ?? "connect",
  });
}
