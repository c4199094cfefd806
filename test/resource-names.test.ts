// Names are unique per tenant for agents, skills and webhook sources (triggers
// have none): a second record with a taken name, by create or by rename, is
// refused with already_exists naming the field, the same on Connect, REST and
// MCP; another tenant may use the name.
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let server: TestServer;
let token: string;

beforeAll(async () => {
  issuer = await devIssuer();
  server = await startServer({ authenticator: issuer.authenticator(60) });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  await server.seedTenant("globex", [{ subject: issuer.clientId, role: "admin" }]);
  token = await devToken(issuer);
});
afterAll(() => server.close());

async function rest(method: string, path: string, body: unknown, tenant = "acme"): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${server.url}/api/v1${path}`, {
    method,
    headers: { ...bearer(token, tenant), "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

async function mcpTool(name: string, args: Json, tenant = "acme"): Promise<{ isError?: boolean; text: string }> {
  const res = await fetch(`${server.url}/mcp?tenant=${tenant}`, {
    method: "POST",
    headers: { ...bearer(token), "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  const { result } = (await res.json()) as { result: { isError?: boolean; content: { text: string }[] } };
  return { isError: result.isError, text: result.content[0]!.text };
}

// Each kind: how to make one with a name over REST, and its REST collection.
const KINDS = [
  { kind: "agent", field: "agent.name", path: "/agents", body: (name: string) => ({ agent: { name, model: PLACEHOLDER_MODEL } }) },
  // An unreachable MCP URL: creating records the failed tool listing, it does not fail.
  { kind: "skill", field: "skill.name", path: "/skills", body: (name: string) => ({ skill: { name, mcpUrl: "https://192.0.2.1/mcp" } }) },
  { kind: "webhook source", field: "webhook_source.name", path: "/webhook-sources", body: (name: string) => ({ webhookSource: { name } }) },
] as const;

describe.each(KINDS)("a $kind", ({ kind, field, path, body }) => {
  const resource = Object.keys(body("x"))[0]!;
  const taken = (name: string, tenant = "acme") => `${field}: ${kind} "${name}" already exists in tenant "${tenant}"`;

  it("refuses a taken name on create, over REST, Connect and MCP alike; another tenant may use it", async () => {
    const first = await rest("POST", path, body("shared"));
    expect(first.status).toBe(201);

    const again = await rest("POST", path, body("shared"));
    expect(again).toEqual({ status: 409, body: { code: "already_exists", message: taken("shared") } });

    const method = `Create${kind.split(" ").map((w) => w[0]!.toUpperCase() + w.slice(1)).join("")}`;
    const viaConnect = await connectCall(server, method, body("shared"), bearer(token, "acme"));
    expect({ status: viaConnect.status, body: viaConnect.body }).toEqual({ status: 409, body: { code: "already_exists", message: taken("shared") } });

    const viaMcp = await mcpTool(`create_${kind.replace(" ", "_")}`, body("shared"));
    expect(viaMcp).toEqual({ isError: true, text: `already_exists: ${taken("shared")}` });

    expect((await rest("POST", path, body("shared"), "globex")).status).toBe(201);
  });

  it("refuses a rename to a taken name, and keeps the record as it was", async () => {
    await rest("POST", path, body("kept"));
    const other = (await rest("POST", path, body("other"))).body[resource] as Json;
    const renamed = await rest("PATCH", `${path}/${other.id as string}?update_mask=name`, { [resource]: { name: "kept" } });
    expect(renamed).toEqual({ status: 409, body: { code: "already_exists", message: taken("kept") } });
    const res = await fetch(`${server.url}/api/v1${path}/${other.id as string}`, { headers: bearer(token, "acme") });
    expect(((await res.json()) as Json)[resource]).toMatchObject({ name: "other" });
  });
});
