// The platform MCP endpoint with the SDK's own client, tokens from a real
// OAuth server (oidc-provider, JWT access tokens), and the same data seen
// through Connect and REST.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

const AUD = "https://api.agentplane.test";
const SCOPES = ["platform:read", "platform:write", "mcp:platform.read", "mcp:platform.write", "mcp:platform"];
type Json = Record<string, unknown>;

let idp: TestIdp;
let server: TestServer;
const token: Record<string, string> = {};

beforeAll(async () => {
  idp = await startIdp({
    clients: [
      { clientId: "admin", clientSecret: "admin-secret", scope: SCOPES.join(" ") },
      { clientId: "viewer", clientSecret: "viewer-secret", scope: SCOPES.join(" ") },
      { clientId: "globex", clientSecret: "globex-secret", scope: SCOPES.join(" ") },
    ],
    scopes: SCOPES,
    audience: AUD,
    accessTokenFormat: "jwt",
  });
  server = await startServer({
    authenticator: createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 }),
    mcpAuthorizationServers: [idp.issuer],
  });
  await server.seedTenant("acme", [
    { subject: "admin", role: "admin" },
    { subject: "viewer", role: "viewer" },
  ]);
  await server.seedTenant("globex", [{ subject: "globex", role: "admin" }]);
  const grants: [string, string, string][] = [
    ["adminRead", "admin", "mcp:platform.read"],
    ["adminWrite", "admin", "mcp:platform.read mcp:platform.write"],
    ["adminWriteOnly", "admin", "mcp:platform.write"],
    ["adminLegacy", "admin", "mcp:platform"],
    ["viewerWrite", "viewer", "mcp:platform.read mcp:platform.write"],
    ["viewerLegacy", "viewer", "mcp:platform"],
    ["adminApi", "admin", "platform:read platform:write"],
    ["globex", "globex", "mcp:platform"],
  ];
  for (const [name, client, scope] of grants) token[name] = await idp.token(client, scope);
});
afterAll(async () => {
  await server.close();
  await idp.stop();
});

async function connect(bearerToken: string, where: { query?: string; header?: string } = { query: "acme" }) {
  const url = new URL(`${server.url}/mcp`);
  if (where.query) url.searchParams.set("tenant", where.query);
  const headers: Record<string, string> = { authorization: `Bearer ${bearerToken}` };
  if (where.header) headers["x-platform-tenant"] = where.header;
  const client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  return client;
}

async function raw(body: unknown, headers: Record<string, string>, query = "?tenant=acme") {
  const res = await fetch(`${server.url}/mcp${query}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Json };
}

const INIT = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

describe("protocol", () => {
  it("initializes with the SDK client and answers ping", async () => {
    const client = await connect(token.adminRead!);
    expect(client.getServerVersion()).toMatchObject({ name: "agentplane" });
    expect(client.getServerCapabilities()).toMatchObject({ tools: {} });
    await expect(client.ping()).resolves.toEqual({});
    await client.close();
  });

  it("negotiates 2025-06-18 as well as the latest protocol", async () => {
    const res = await raw(INIT, bearer(token.adminRead!));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ result: { protocolVersion: "2025-06-18", serverInfo: { name: "agentplane" } } });
  });

  it("answers GET and DELETE with 405: stateless, no stream, no session", async () => {
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(`${server.url}/mcp?tenant=acme`, { method, headers: bearer(token.adminRead!) });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
    }
  });

  it("refuses a foreign Host header (DNS rebinding)", async () => {
    const res = await raw(INIT, { ...bearer(token.adminRead!), origin: "http://evil.example" });
    expect(res.status).toBe(403);
  });
});

describe("authentication and tenant selection", () => {
  it("challenges a request without a token, pointing at the protected resource metadata", async () => {
    const res = await raw(INIT, {});
    expect(res.status).toBe(401);
    // No credentials: no error code (RFC 6750 §3.1), the scopes to ask for.
    expect(res.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp", scope="mcp:platform.read mcp:platform.write"`,
    );
    expect((await raw(INIT, bearer("not-a-token"))).status).toBe(401);
  });

  it("serves the RFC 9728 metadata at both paths", async () => {
    for (const path of ["/.well-known/oauth-protected-resource/mcp", "/mcp/.well-known/oauth-protected-resource"]) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        resource: `${server.url}/mcp`,
        authorization_servers: [idp.issuer],
        scopes_supported: ["mcp:platform.read", "mcp:platform.write", "mcp:platform"],
        bearer_methods_supported: ["header"],
        resource_name: "agentplane platform",
      });
    }
  });

  it("takes the tenant from the query or the X-Platform-Tenant header", async () => {
    for (const where of [{ query: "acme" }, { header: "acme" }]) {
      const client = await connect(token.adminRead!, where);
      const result = (await client.callTool({ name: "list_agents", arguments: {} })) as CallToolResult;
      expect(result.isError).toBeFalsy();
      await client.close();
    }
  });

  it("lets a client without a tenant find its tenants: initialize, the tenant-less tools, list_memberships", async () => {
    const client = await connect(token.adminRead!, {});
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(["list_memberships"]);
    const result = (await client.callTool({ name: "list_memberships", arguments: {} })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual({ memberships: [{ tenant: "acme", displayName: "acme", role: "ROLE_ADMIN" }] });
    await client.close();
  });

  it("answers a tool that reads tenant data without a tenant with 400 naming X-Platform-Tenant", async () => {
    await raw(INIT, bearer(token.adminRead!), "");
    const call = { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "list_agents", arguments: {} } };
    const res = await raw(call, bearer(token.adminRead!), "");
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ jsonrpc: "2.0", id: 3, error: { message: expect.stringContaining("X-Platform-Tenant") } });
  });

  it("refuses organization headers with 400 naming the header", async () => {
    for (const header of ["X-Org-ID", "X-Organization-ID"]) {
      const res = await raw(INIT, { ...bearer(token.adminRead!), [header]: "acme" });
      expect(res.status).toBe(400);
      expect((res.body.error as Json).message).toContain(header);
    }
  });

  it("refuses a non-member with 403, the same for a tenant that does not exist", async () => {
    const member = await raw(INIT, bearer(token.globex!), "?tenant=acme");
    const missing = await raw(INIT, bearer(token.globex!), "?tenant=nosuch");
    expect(member.status).toBe(403);
    expect(missing.status).toBe(403);
    expect(JSON.stringify(missing.body).replace("nosuch", "acme")).toBe(JSON.stringify(member.body));
  });
});

describe("tools per scope and role", () => {
  const names = async (t: string) => {
    const client = await connect(t);
    const { tools } = await client.listTools();
    await client.close();
    return tools;
  };

  it("lists only the tools the caller may call, with annotations and schemas", async () => {
    const read = await names(token.adminRead!);
    expect(read.map((t) => t.name)).toEqual(expect.arrayContaining(["list_agents", "get_agent", "list_runs", "get_event"]));
    expect(read.every((t) => t.annotations?.readOnlyHint === true)).toBe(true);
    expect(read.map((t) => t.name)).not.toContain("create_agent");
    expect(read.map((t) => t.name)).not.toContain("list_tenants"); // platform:admin only

    const write = (await names(token.adminWrite!)).map((t) => t.name);
    expect(write).toEqual(expect.arrayContaining(["list_agents", "create_agent", "delete_agent", "run_agent", "cancel_run"]));
    expect((await names(token.adminWriteOnly!)).map((t) => t.name)).not.toContain("list_agents");
    expect((await names(token.viewerWrite!)).map((t) => t.name)).not.toContain("create_agent");
    expect((await names(token.adminLegacy!)).map((t) => t.name)).toEqual(expect.arrayContaining(["list_agents", "create_agent"]));

    const create = (await names(token.adminWrite!)).find((t) => t.name === "create_agent")!;
    expect(create.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false });
    expect(create.inputSchema).toMatchObject({
      type: "object",
      required: ["agent"],
      properties: {
        agent: {
          type: "object",
          properties: {
            name: { type: "string" },
            skillIds: { type: "array", items: { type: "string" } },
            maxSteps: { type: "integer" },
            timeout: { type: "string" },
            allowedTools: { type: "object" },
            steps: { type: "array", items: { type: "object", properties: { tool: { type: "string" } } } },
          },
        },
      },
    });
    const del = (await names(token.adminWrite!)).find((t) => t.name === "delete_agent")!;
    expect(del.annotations).toMatchObject({ destructiveHint: true });
    const listRuns = read.find((t) => t.name === "list_runs")!;
    expect((listRuns.inputSchema.properties as Json).status).toMatchObject({ type: "string", enum: expect.arrayContaining(["RUN_STATUS_QUEUED"]) });
  });

  it("offers no output-only field as an input, names the record an update changes, and describes fields by their proto comments", async () => {
    const tools = await names(token.adminWrite!);
    const schema = (name: string) => tools.find((t) => t.name === name)!.inputSchema as Json;
    const props = (s: Json, ...path: string[]) => path.reduce((at, key) => (at.properties as Record<string, Json>)[key]!, s).properties as Record<string, Json>;

    const agent = props(schema("create_agent"), "agent");
    for (const field of ["id", "tenant", "createTime", "updateTime"]) expect(agent).not.toHaveProperty(field);
    expect(agent.instructions).toEqual({ type: "string", description: "System message of a model agent." });
    expect(Object.keys(props(schema("create_agent"), "agent", "model"))).toEqual(["baseUrl", "model", "apiKey"]); // no apiKeySet
    expect(props(schema("create_agent"), "agent", "model").apiKey!.description).toContain("never returned");

    const update = schema("update_agent");
    expect(update.required).toEqual(["agent"]);
    expect((update.properties as Record<string, Json>).agent).toMatchObject({ required: ["id"] });
    expect(props(update, "agent").id).toEqual({ type: "string", description: "The Agent this request changes." });
    for (const field of ["tenant", "createTime", "updateTime"]) expect(props(update, "agent")).not.toHaveProperty(field);

    const skill = props(schema("create_skill"), "skill");
    for (const field of ["id", "tenant", "tools", "toolsRefreshTime", "toolsRefreshError"]) expect(skill).not.toHaveProperty(field);
    expect(Object.keys(props(schema("create_skill"), "skill", "auth", "staticBearer"))).toEqual(["token"]); // no tokenSet
    expect(Object.keys(props(schema("create_skill"), "skill", "auth", "oauth"))).not.toContain("clientSecretSet");
    for (const field of ["id", "tenant", "previousTokenExpireTime"]) expect(props(schema("create_webhook_source"), "webhookSource")).not.toHaveProperty(field);
    expect(props(schema("create_trigger"), "trigger")).not.toHaveProperty("filterError");

    // A request's own `id` is no resource field: it stays, described.
    expect((schema("get_agent").properties as Record<string, Json>).id).toEqual({ type: "string" });
    expect(schema("get_agent").required).toEqual(["id"]);
    expect((schema("rotate_webhook_source_token").properties as Record<string, Json>).gracePeriod!.description).toContain("zero revokes it at once");
    expect(tools.find((t) => t.name === "run_agent")!.description).toContain("Queues a manual run of the agent with an input.");
  });

  it("creates with create_agent and the agent is visible through Connect", async () => {
    const client = await connect(token.adminWrite!);
    const result = (await client.callTool({ name: "create_agent", arguments: { agent: { name: "via-mcp", model: PLACEHOLDER_MODEL } } })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    const agent = (result.structuredContent as { agent: Json }).agent;
    expect(agent).toMatchObject({ name: "via-mcp", tenant: "acme" });
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(result.structuredContent);
    const listed = await connectCall(server, "ListAgents", {}, bearer(token.adminApi!, "acme"));
    expect((listed.body.agents as Json[]).map((a) => a.id)).toContain(agent.id);
    await client.close();
  });

  it("answers a write with only the read scope with 403 insufficient_scope naming the scope, and the one to keep", async () => {
    const res = await raw(
      { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "create_agent", arguments: { agent: { name: "x" } } } },
      bearer(token.adminRead!),
    );
    expect(res.status).toBe(403);
    expect(res.headers.get("www-authenticate")).toContain('error="insufficient_scope", scope="mcp:platform.read mcp:platform.write"');
    expect(res.body).toMatchObject({ id: 7, error: { message: expect.stringContaining("mcp:platform.write") } });
  });

  it("gives a viewer with the write scope the same permission_denied as Connect, as a tool error", async () => {
    const client = await connect(token.viewerWrite!);
    const result = (await client.callTool({ name: "create_agent", arguments: { agent: { name: "x" } } })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect((result.content[0] as { text: string }).text).toBe('permission_denied: CreateAgent needs the admin role in tenant "acme"');
    await client.close();
  });

  it("accepts the legacy scope for reads and writes, still bounded by the role", async () => {
    const admin = await connect(token.adminLegacy!);
    expect(((await admin.callTool({ name: "create_agent", arguments: { agent: { name: "legacy", model: PLACEHOLDER_MODEL } } })) as CallToolResult).isError).toBeFalsy();
    expect(((await admin.callTool({ name: "list_agents", arguments: {} })) as CallToolResult).isError).toBeFalsy();
    await admin.close();
    const viewer = await connect(token.viewerLegacy!);
    expect(((await viewer.callTool({ name: "list_agents", arguments: {} })) as CallToolResult).isError).toBeFalsy();
    const write = (await viewer.callTool({ name: "create_agent", arguments: { agent: { name: "no" } } })) as CallToolResult;
    expect(write.isError).toBe(true);
    await viewer.close();
  });

  it("reports bad arguments and service validation as tool errors with the service's message", async () => {
    const client = await connect(token.adminWrite!);
    const bad = (await client.callTool({ name: "create_agent", arguments: { agent: { name: "" } } })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect((bad.content[0] as { text: string }).text).toBe("invalid_argument: agent.name: is required");
    const unknown = (await client.callTool({ name: "get_agent", arguments: { id: "agt_x", colour: 1 } })) as CallToolResult;
    expect(unknown.isError).toBe(true);
    await client.close();
  });

  it("keeps another tenant's records invisible", async () => {
    const acme = await connect(token.adminWrite!);
    const created = (await acme.callTool({ name: "create_agent", arguments: { agent: { name: "acme-only", model: PLACEHOLDER_MODEL } } })) as CallToolResult;
    const id = ((created.structuredContent as { agent: Json }).agent.id) as string;
    await acme.close();
    const globex = await connect(token.globex!, { query: "globex" });
    const got = (await globex.callTool({ name: "get_agent", arguments: { id } })) as CallToolResult;
    expect(got.isError).toBe(true);
    expect((got.content[0] as { text: string }).text).toBe(`not_found: agent "${id}" not found`);
    const listed = (await globex.callTool({ name: "list_agents", arguments: {} })) as CallToolResult;
    expect(JSON.stringify(listed.structuredContent)).not.toContain(id);
    await globex.close();
  });
});

describe("one implementation behind every surface", () => {
  let agentId: string;
  beforeAll(async () => {
    agentId = ((await connectCall(server, "CreateAgent", { agent: { name: "same-everywhere", description: "d", model: PLACEHOLDER_MODEL } }, bearer(token.adminApi!, "acme"))).body.agent as Json).id as string;
  });

  // REST also answers empty lists and maps, which proto JSON (Connect, MCP) leaves out.
  const emptyOfAgent = { allowedTools: {}, skillIds: [], steps: [] };
  const cases: { name: string; connect: [string, Json]; rest: string; mcp: [string, Json]; restAdds?: (connect: Json) => Json }[] = [
    {
      name: "list agents",
      connect: ["ListAgents", {}],
      rest: "/api/v1/agents",
      mcp: ["list_agents", {}],
      restAdds: (b) => ({ agents: (b.agents as Json[]).map((a) => ({ ...emptyOfAgent, ...a })) }),
    },
    {
      name: "get agent",
      connect: ["GetAgent", { id: "$id" }],
      rest: "/api/v1/agents/$id",
      mcp: ["get_agent", { id: "$id" }],
      restAdds: (b) => ({ agent: { ...emptyOfAgent, ...(b.agent as Json) } }),
    },
    { name: "list runs", connect: ["ListRuns", {}], rest: "/api/v1/runs", mcp: ["list_runs", {}], restAdds: (b) => ({ runs: [], ...b }) },
    { name: "unknown agent", connect: ["GetAgent", { id: "agt_00000000-0000-7000-8000-000000000000" }], rest: "/api/v1/agents/agt_00000000-0000-7000-8000-000000000000", mcp: ["get_agent", { id: "agt_00000000-0000-7000-8000-000000000000" }] },
  ];

  it.each(cases)("$name returns the same data over Connect, REST and MCP", async (c) => {
    const fill = (o: Json) => JSON.parse(JSON.stringify(o).replaceAll("$id", agentId)) as Json;
    const viaConnect = await connectCall(server, c.connect[0], fill(c.connect[1]), bearer(token.adminApi!, "acme"));
    const restRes = await fetch(`${server.url}${c.rest.replace("$id", agentId)}`, { headers: bearer(token.adminApi!, "acme") });
    const viaRest = { status: restRes.status, body: (await restRes.json()) as Json };
    const client = await connect(token.adminLegacy!);
    const viaMcp = (await client.callTool({ name: c.mcp[0], arguments: fill(c.mcp[1]) })) as CallToolResult;
    await client.close();

    expect(viaRest).toEqual({ status: viaConnect.status, body: c.restAdds ? c.restAdds(viaConnect.body) : viaConnect.body });
    if (viaConnect.status === 200) {
      expect(viaMcp.isError).toBeFalsy();
      expect(viaMcp.structuredContent).toEqual(viaConnect.body);
    } else {
      expect(viaMcp.isError).toBe(true);
      expect((viaMcp.content[0] as { text: string }).text).toBe(`${viaConnect.body.code as string}: ${viaConnect.body.message as string}`);
    }
  });
});
