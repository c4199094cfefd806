// What the dev issuer's interactive login offers, apart from the engine
// (dev-provider.ts, loaded only when `agentplane dev` mounts it).

// The one person who signs in to `agentplane dev`; admin of tenant `dev`.
export const DEV_USER = "dev-user";
export const DEV_TENANT = "dev";
export const CONSOLE_CLIENT_ID = "agentplane-console";
// Scopes each resource grants. No platform:admin: an interactive login is
// for one tenant's admin; creating tenants stays with the dev client.
export const API_SCOPES = ["platform:read", "platform:write"];
export const MCP_SCOPES = ["mcp:platform.read", "mcp:platform.write", "mcp:platform"];
export const CONSOLE_SCOPES = ["openid", ...API_SCOPES, "mcp:platform.read", "mcp:platform.write"];
// Scopes an ID token or the session covers rather than a resource.
export const OIDC_SCOPES = new Set(["openid", "offline_access"]);

// Of the scopes a client asks for, those the sign-in may grant: the
// provider would grant any scope the grant names, platform:admin included.
const GRANTABLE = new Set([...OIDC_SCOPES, ...API_SCOPES, ...MCP_SCOPES]);
export const grantableScopes = (requested: string[]): string[] => requested.filter((s) => GRANTABLE.has(s));

// Bounds on the open registration endpoint: the surface checks a request
// before the provider sees it; past `clients` the oldest registration no one
// is signed in with goes. Registrations take a token of one bucket (`burst`,
// refilled `perMinute`): a client registers once, so a developer's tools
// never meet it, while a flood cannot rewrite the clients file per request
// nor churn every client out.
export const REGISTRATION_LIMITS = {
  clients: 100,
  redirectUris: 10,
  redirectUriLength: 2000,
  clientNameLength: 200,
  bodyBytes: 16 * 1024,
  burst: 20,
  perMinute: 10,
};
