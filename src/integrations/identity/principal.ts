import { Code, ConnectError } from "@connectrpc/connect";

// What an authenticated caller is, whichever identity provider vouched for it.
export interface Principal {
  // Token `sub`, or `client_id` when the token has none.
  subject: string;
  scopes: ReadonlySet<string>;
  claims: Readonly<Record<string, unknown>>;
  // Epoch milliseconds after which the token is no longer valid.
  expiresAt?: number;
  // The token's audience is the MCP resource (`<public url>/mcp`, RFC 8707)
  // and not the API: only the MCP endpoint accepts it.
  mcpOnly?: boolean;
}

export interface Authenticator {
  // Resolves the principal, or throws ConnectError `unauthenticated` (bad
  // token) or `unavailable` (the identity provider cannot answer).
  authenticate(token: string): Promise<Principal>;
}

// Throws `unauthenticated` when the token names no subject. A `sub` that is
// present but not a non-empty string refuses the token rather than falling
// back to `client_id`: a user's token must never act as its client.
export function principalFromClaims(claims: Record<string, unknown>, expiresAt?: number, mcpOnly?: boolean): Principal {
  if (claims.sub !== undefined && (typeof claims.sub !== "string" || claims.sub === ""))
    throw new ConnectError("token claim \"sub\" must be a non-empty string", Code.Unauthenticated);
  const subject = [claims.sub, claims.client_id, claims.azp].find((v) => typeof v === "string" && v !== "");
  if (typeof subject !== "string") throw new ConnectError("token has neither sub nor client_id", Code.Unauthenticated);
  return { subject, scopes: scopesOf(claims), claims, expiresAt, ...(mcpOnly && { mcpOnly }) };
}

// `scope` (RFC 8693/9068, space-separated), `scp` (array, some IdPs) and
// Auth0 RBAC `permissions` are all honoured.
function scopesOf(claims: Record<string, unknown>): Set<string> {
  const scopes = new Set<string>();
  if (typeof claims.scope === "string") for (const s of claims.scope.split(" ")) if (s) scopes.add(s);
  for (const list of [claims.scp, claims.permissions])
    if (Array.isArray(list)) for (const s of list) if (typeof s === "string") scopes.add(s);
  return scopes;
}

// Whether a token's `aud` names the MCP resource but not the API audience.
export function isMcpOnly(aud: unknown, audience: string, mcpResource: string | undefined): boolean {
  const auds = Array.isArray(aud) ? aud : [aud];
  return mcpResource !== undefined && auds.includes(mcpResource) && !auds.includes(audience);
}
