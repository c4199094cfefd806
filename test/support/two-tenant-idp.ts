// A real OIDC IdP issuing JWTs for three clients, for suites about who may
// call an admin-only RPC on all three surfaces: `admin` and `viewer` of
// tenant acme, `globex` admin of its own tenant, each with an API token and
// (the first two) a platform MCP token.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createAuthenticator } from "../../src/integrations/identity/index.js";
import { startIdp, type TestIdp } from "./oidc-idp.js";
import { bearer, startServer, type TestServer, type TestServerOptions } from "./server.js";

const AUD = "https://api.agentplane.test";
const SCOPES = ["platform:read", "platform:write", "mcp:platform.read", "mcp:platform.write"];
const API = "platform:read platform:write";
const MCP = "mcp:platform.read mcp:platform.write";

export interface TwoTenantIdp {
  idp: TestIdp;
  // admin, viewer, globex: API tokens; adminMcp, viewerMcp: platform MCP tokens.
  token: Record<string, string>;
  // A server trusting the IdP, with tenants acme (admin, viewer) and globex (globex).
  start(options?: Partial<TestServerOptions>): Promise<TestServer>;
}

export async function startTwoTenantIdp(): Promise<TwoTenantIdp> {
  const idp = await startIdp({
    accessTokenFormat: "jwt",
    audience: AUD,
    scopes: SCOPES,
    clients: ["admin", "viewer", "globex"].map((clientId) => ({ clientId, clientSecret: `${clientId}-secret-0123456789`, scope: SCOPES.join(" ") })),
  });
  const token: Record<string, string> = {};
  for (const client of ["admin", "viewer", "globex"]) token[client] = await idp.token(client, API);
  token.adminMcp = await idp.token("admin", MCP);
  token.viewerMcp = await idp.token("viewer", MCP);
  const start = async (options: Partial<TestServerOptions> = {}) => {
    const authenticator = createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 });
    const server = await startServer({ authenticator, mcpAuthorizationServers: [idp.issuer], ...options });
    await server.seedTenant("acme", [
      { subject: "admin", role: "admin" },
      { subject: "viewer", role: "viewer" },
    ]);
    await server.seedTenant("globex", [{ subject: "globex", role: "admin" }]);
    return server;
  };
  return { idp, token, start };
}

// A platform MCP client of `server` for tenant acme with bearer `token`.
export async function platformMcpClient(server: TestServer, token: string): Promise<Client> {
  const client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp?tenant=acme`), { requestInit: { headers: bearer(token) } }));
  return client;
}
