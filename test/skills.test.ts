// Skills as customer-operated MCP servers (real SDK servers on loopback), the
// service's MCP client in each auth mode, the outbound guard, and agents that
// call tools: deterministic plans, a scripted model, and webhook → run → tool.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { reservePort, startOAuthMcp, startOpenMcp, startStaticBearerMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { startModelServer } from "./support/model-server.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { bearer, connectCall, connectMust, startServer, type TestServer } from "./support/server.js";

type Json = Record<string, unknown>;
const SCOPE = "mcp:crm";

let issuer: DevIssuer;
let admin: string;
let server: TestServer;

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  server = await startServer({
    authenticator: issuer.authenticator(60),
    outboundAllow: ["127.0.0.0/8"],
    runtime: { executor: "agents", concurrency: 4 },
  });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
});
afterAll(() => server.close());

async function api(method: string, body: unknown, on: TestServer = server): Promise<{ status: number; body: Json }> {
  const res = await connectCall(on, method, body, bearer(admin, "acme"));
  return { status: res.status, body: res.body };
}

async function must(method: string, body: unknown, on: TestServer = server): Promise<Json> {
  return connectMust(on, method, body, bearer(admin, "acme"));
}

async function createSkill(skill: Json, on: TestServer = server): Promise<Json> {
  return (await must("CreateSkill", { skill }, on)).skill as Json;
}

// Runs a one-step deterministic agent on the skill and waits for the run's end.
// Names are unique in a tenant: each agent gets its own.
let agents = 0;
async function runTool(skillId: string, tool: string, args: string): Promise<Json> {
  const agent = (await must("CreateAgent", { agent: { name: `call ${tool} ${++agents}`, skillIds: [skillId], steps: [{ skillId, tool, arguments: args }] } })).agent as Json;
  const run = (await must("RunAgent", { id: agent.id, input: { text: "hi" } })).run as Json;
  return waitForRun(run.id as string);
}

async function waitForRun(id: string, on: TestServer = server): Promise<Json> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const run = (await must("GetRun", { id }, on)).run as Json;
    if (!["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string)) return run;
    if (Date.now() > deadline) throw new Error(`run ${id} still ${String(run.status)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("OAuth-protected skills", () => {
  let idp: TestIdp;
  let mcp: Awaited<ReturnType<typeof startOAuthMcp>>;
  let port: number;

  beforeAll(async () => {
    port = await reservePort();
    idp = await startIdp({
      clients: [
        { clientId: "agentplane", clientSecret: "s3cret", scope: SCOPE },
        { clientId: "limited", clientSecret: "limited-secret", scope: "mcp:other" },
      ],
      scopes: [SCOPE, "mcp:other"],
      audience: `http://127.0.0.1:${port}/mcp`,
      accessTokenFormat: "jwt",
    });
    mcp = await startOAuthMcp({ port, issuer: idp.issuer, jwksUrl: idp.jwksUrl, requiredScope: SCOPE });
  });
  afterAll(async () => {
    await mcp.close();
    await idp.stop();
  });

  const oauth = (extra: Json = {}) => ({ oauth: { issuer: idp.issuer, clientId: "agentplane", clientSecret: "s3cret", ...extra } });

  it("discovers, gets a token, lists tools at create time and reuses the token for calls", async () => {
    const before = server.app.skills.tokenRequests;
    const skill = await createSkill({ name: "crm", mcpUrl: mcp.url, auth: oauth() });
    expect(skill.toolsRefreshError).toBeUndefined();
    expect((skill.tools as Json[]).map((t) => t.name).sort()).toEqual(["add", "echo", "fail", "slow", "track"]);
    expect(skill.toolsRefreshTime).toBeDefined();

    for (let i = 0; i < 3; i++) {
      const run = await runTool(skill.id as string, "echo", '{"text": input.text & "-" & $string(' + i + ")}");
      expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: `hi-${i}` } });
    }
    // One token for the create-time refresh, one for the pooled runtime client: reused across runs.
    expect(server.app.skills.tokenRequests - before).toBeLessThanOrEqual(2);
    expect(mcp.toolCalls().filter((c) => c.name === "echo")).toHaveLength(3);
  });

  it("finds the metadata at the seed's path when the challenge does not name it", async () => {
    const p = await reservePort();
    const other = await startIdp({ clients: [{ clientId: "agentplane", clientSecret: "s3cret", scope: SCOPE }], scopes: [SCOPE], audience: `http://127.0.0.1:${p}/mcp`, accessTokenFormat: "jwt" });
    const bare = await startOAuthMcp({ port: p, issuer: other.issuer, jwksUrl: other.jwksUrl, requiredScope: SCOPE, challengeWithoutMetadataUrl: true });
    try {
      const skill = await createSkill({ name: "bare", mcpUrl: bare.url, auth: { oauth: { issuer: other.issuer, clientId: "agentplane", clientSecret: "s3cret" } } });
      expect(skill.toolsRefreshError).toBeUndefined();
      expect((skill.tools as Json[]).length).toBe(5);
    } finally {
      await bare.close();
      await other.stop();
    }
  });

  it("refreshes the token once it is about to expire", async () => {
    const p = await reservePort();
    const shortLived = await startIdp({ clients: [{ clientId: "agentplane", clientSecret: "s3cret", scope: SCOPE }], scopes: [SCOPE], audience: `http://127.0.0.1:${p}/mcp`, accessTokenFormat: "jwt", accessTokenTtlSeconds: 31 });
    const short = await startOAuthMcp({ port: p, issuer: shortLived.issuer, jwksUrl: shortLived.jwksUrl, requiredScope: SCOPE });
    try {
      const skill = await createSkill({ name: "short", mcpUrl: short.url, auth: { oauth: { issuer: shortLived.issuer, clientId: "agentplane", clientSecret: "s3cret" } } });
      const first = await runTool(skill.id as string, "echo", '{"text": "a"}');
      expect(first.status).toBe("RUN_STATUS_SUCCEEDED");
      const before = server.app.skills.tokenRequests;
      await new Promise((r) => setTimeout(r, 1100)); // 31 s token, 30 s margin: stale after 1 s
      const second = await runTool(skill.id as string, "echo", '{"text": "b"}');
      expect(second.status).toBe("RUN_STATUS_SUCCEEDED");
      expect(server.app.skills.tokenRequests - before).toBe(1);
    } finally {
      await short.close();
      await shortLived.stop();
    }
  });

  it("refuses metadata whose resource is not the skill URL", async () => {
    const p = await reservePort();
    const liar = await startOAuthMcp({ port: p, issuer: idp.issuer, jwksUrl: idp.jwksUrl, requiredScope: SCOPE, advertisedResource: "https://elsewhere.example/mcp" });
    try {
      const skill = await createSkill({ name: "liar", mcpUrl: liar.url, auth: oauth() });
      expect(skill.toolsRefreshError).toContain("skill_auth_failed (resource metadata)");
      expect(skill.toolsRefreshError).toContain("https://elsewhere.example/mcp");
      expect(liar.authorizedRequests()).toBe(0);
    } finally {
      await liar.close();
    }
  });

  it("sends no credential to an authorization server other than the configured issuer", async () => {
    let hits = 0;
    const rogue: Server = createServer((_req, res) => {
      hits++;
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => rogue.listen(0, "127.0.0.1", r));
    const rogueIssuer = `http://127.0.0.1:${(rogue.address() as AddressInfo).port}`;
    const p = await reservePort();
    const misdirecting = await startOAuthMcp({ port: p, issuer: idp.issuer, jwksUrl: idp.jwksUrl, requiredScope: SCOPE, advertisedIssuer: rogueIssuer });
    try {
      const skill = await createSkill({ name: "misdirecting", mcpUrl: misdirecting.url, auth: oauth() });
      expect(skill.toolsRefreshError).toContain(`not the configured issuer ${idp.issuer}; no credentials were sent`);
      expect(hits).toBe(0);
    } finally {
      await misdirecting.close();
      await new Promise((r) => rogue.close(r));
    }
  });

  it("fails clearly when the token cannot carry the scope the server requires", async () => {
    const skill = await createSkill({ name: "limited", mcpUrl: mcp.url, auth: { oauth: { issuer: idp.issuer, clientId: "limited", clientSecret: "limited-secret", scopes: ["mcp:other"] } } });
    expect(skill.toolsRefreshError).toMatch(/skill_auth_failed \(token request\).*invalid_scope|skill_unauthorized.*mcp:crm/);
    const refreshed = await api("RefreshSkillTools", { id: skill.id });
    expect(refreshed).toMatchObject({ status: 400, body: { code: "failed_precondition" } });
    expect(refreshed.body.message).toContain("listing tools failed");
  });
});

describe("static bearer skills", () => {
  let mcp: CustomerMcp;
  beforeAll(async () => {
    mcp = await startStaticBearerMcp("right-token");
  });
  afterAll(() => mcp.close());

  it("sends the registered token on every request", async () => {
    const skill = await createSkill({ name: "legacy", mcpUrl: mcp.url, auth: { staticBearer: { token: "right-token" } } });
    expect((skill.tools as Json[]).length).toBe(5);
    const run = await runTool(skill.id as string, "add", '{"a": 2, "b": 3}');
    expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { sum: 5 } });
  });

  it("turns a refused token into skill_unauthorized with the server's -32000 body, without retrying", async () => {
    const skill = await createSkill({ name: "wrong", mcpUrl: mcp.url, auth: { staticBearer: { token: "wrong-token" } } });
    expect(skill.toolsRefreshError).toContain("skill_unauthorized");
    const before = mcp.requests();
    const run = await runTool(skill.id as string, "echo", '{"text": "x"}');
    expect(run.status).toBe("RUN_STATUS_FAILED");
    const step = (run.steps as Json[])[0]!;
    expect(step.error).toContain("skill_unauthorized");
    expect(step.error).toContain("JSON-RPC error -32000: Unauthorized");
    expect(mcp.requests() - before).toBe(1);
  });
});

describe("write-only secrets never follow a skill to another server", () => {
  let mcp: CustomerMcp;
  beforeAll(async () => {
    mcp = await startStaticBearerMcp("right-token");
  });
  afterAll(() => mcp.close());

  // An admin cannot read a skill's secret; pointing the skill elsewhere must
  // not be a way to receive it.
  it("refuses to move a static bearer or headers skill to another origin unless the secret is given again", async () => {
    const bearerSkill = await createSkill({ name: "held", mcpUrl: mcp.url, auth: { staticBearer: { token: "right-token" } } });
    const elsewhere = "http://attacker.example/mcp";
    const moved = await api("UpdateSkill", { skill: { id: bearerSkill.id, mcpUrl: elsewhere }, updateMask: "mcpUrl" });
    expect(moved.status).toBe(400);
    expect(moved.body).toMatchObject({ code: "invalid_argument", message: expect.stringMatching(/skill\.auth\.static_bearer\.token.*another origin/) });
    // Same origin, another path: the secret stays.
    const samePlace = await api("UpdateSkill", { skill: { id: bearerSkill.id, mcpUrl: `${mcp.url.replace(/\/mcp$/, "")}/v2/mcp` }, updateMask: "mcpUrl" });
    expect(samePlace.status).toBe(200);
    // Given again, it may move.
    const regiven = await api("UpdateSkill", {
      skill: { id: bearerSkill.id, mcpUrl: elsewhere, auth: { staticBearer: { token: "new-token" } } },
      updateMask: "mcpUrl,auth",
    });
    expect(regiven.status).toBe(200);

    const headersSkill = await createSkill({ name: "keyed", mcpUrl: mcp.url, auth: { headers: { headers: [{ name: "X-API-Key", value: "k-123456" }] } } });
    const movedHeaders = await api("UpdateSkill", {
      skill: { id: headersSkill.id, mcpUrl: elsewhere, auth: { headers: { headers: [{ name: "X-API-Key" }] } } },
      updateMask: "mcpUrl,auth",
    });
    expect(movedHeaders.status).toBe(400);
    expect(movedHeaders.body).toMatchObject({ message: expect.stringMatching(/headers\[0\]\.value.*another origin/) });
  });

  it("keeps an OAuth client secret only while the issuer and the origin stay the same", async () => {
    const skill = await createSkill({
      name: "oauth-held",
      mcpUrl: mcp.url,
      auth: { oauth: { issuer: "https://auth.example.com", clientId: "c", clientSecret: "s3cret-value" } },
    });
    const otherIssuer = await api("UpdateSkill", {
      skill: { id: skill.id, auth: { oauth: { issuer: "https://attacker.example", clientId: "c" } } },
      updateMask: "auth",
    });
    expect(otherIssuer.status).toBe(400);
    expect(otherIssuer.body).toMatchObject({ message: expect.stringMatching(/client_secret.*another issuer/) });
    // The credential goes to the issuer only, but the tokens it gets go to
    // the MCP URL (issue 19 item 7): moving to another origin asks for it again.
    const movedUrl = await api("UpdateSkill", { skill: { id: skill.id, mcpUrl: "http://elsewhere.example/mcp" }, updateMask: "mcpUrl" });
    expect(movedUrl.status).toBe(400);
    expect(movedUrl.body).toMatchObject({ message: expect.stringMatching(/client_secret.*another origin/) });
    const samePlace = await api("UpdateSkill", { skill: { id: skill.id, mcpUrl: new URL("/other/mcp", mcp.url).href }, updateMask: "mcpUrl" });
    expect(samePlace.status).toBe(200);
  });
});

describe("a server that is not an MCP endpoint", () => {
  let open: CustomerMcp;
  let notFound: Server;
  let notFoundUrl: string;
  let hits = 0;
  beforeAll(async () => {
    open = await startOpenMcp();
    notFound = createServer((_req, res) => {
      hits++;
      res.writeHead(404, { "content-type": "text/html" }).end("<html>no such page</html>");
    });
    await new Promise<void>((r) => notFound.listen(0, "127.0.0.1", r));
    notFoundUrl = `http://127.0.0.1:${(notFound.address() as AddressInfo).port}/wrong/mcp`;
  });
  afterAll(async () => {
    await open.close();
    await new Promise((r) => notFound.close(r));
  });

  it("answers 404: skill_rejected (a wrong URL, not a refused credential), not retried", async () => {
    const skill = await createSkill({ name: "moved", mcpUrl: open.url });
    const agent = (await must("CreateAgent", { agent: { name: "moved", skillIds: [skill.id], steps: [{ skillId: skill.id, tool: "echo", arguments: '{"text": "x"}' }] } }))
      .agent as Json;
    // The server moved: the stored tools stay, the URL no longer answers MCP.
    await must("UpdateSkill", { skill: { id: skill.id, mcpUrl: notFoundUrl }, updateMask: "mcpUrl" });
    const before = hits;
    const run = await waitForRun(((await must("RunAgent", { id: agent.id, input: {} })).run as Json).id as string);
    expect(run.status).toBe("RUN_STATUS_FAILED");
    const error = (run.steps as Json[])[0]!.error as string;
    expect(error).toMatch(/^skill_rejected: .*HTTP 404/);
    expect(error).not.toContain("<html>");
    expect(hits - before).toBe(1);
  });
});

describe("outbound guard", () => {
  it.each([
    ["cloud metadata", "http://169.254.169.254/mcp"],
    ["a private address", "http://10.0.0.7/mcp"],
    ["loopback", "http://127.0.0.1:8099/mcp"],
  ])("refuses a skill at %s without the allow-list", async (_name, url) => {
    const strict = await startServer({ authenticator: issuer.authenticator(60) });
    try {
      await strict.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
      const skill = await createSkill({ name: "ssrf", mcpUrl: url }, strict);
      expect(skill.toolsRefreshError).toContain("outbound_blocked");
      const refreshed = await api("RefreshSkillTools", { id: skill.id }, strict);
      expect(refreshed.body.message).toContain("outbound_blocked");
    } finally {
      await strict.close();
    }
  });

  it("refuses a host name that resolves to loopback", async () => {
    const strict = await startServer({ authenticator: issuer.authenticator(60) });
    try {
      await strict.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
      const skill = await createSkill({ name: "named", mcpUrl: "http://localhost:8099/mcp" }, strict);
      expect(skill.toolsRefreshError).toContain("outbound_blocked");
      expect(skill.toolsRefreshError).toContain("localhost resolves to");
    } finally {
      await strict.close();
    }
  });
});

describe("agents calling tools", () => {
  let open: CustomerMcp;
  let skillId: string;
  beforeAll(async () => {
    open = await startOpenMcp();
    skillId = (await createSkill({ name: "tools", mcpUrl: open.url })).id as string;
  });
  afterAll(() => open.close());

  it("runs a deterministic plan, each step's arguments a JSONata expression over earlier steps", async () => {
    const agent = (await must("CreateAgent", {
      agent: {
        name: "plan",
        skillIds: [skillId],
        steps: [
          { skillId, tool: "add", arguments: '{"a": input.x, "b": 10}' },
          { skillId, tool: "echo", arguments: '{"text": "sum is " & $string(steps[0].result.sum)}' },
        ],
      },
    })).agent as Json;
    const run = await waitForRun(((await must("RunAgent", { id: agent.id, input: { x: 5 } })).run as Json).id as string);
    expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { text: "sum is 15" }, attempt: 1 });
    const steps = run.steps as Json[];
    expect(steps.map((s) => [s.kind, s.tool, s.arguments])).toEqual([
      ["STEP_KIND_TOOL_CALL", "add", { a: 5, b: 10 }],
      ["STEP_KIND_TOOL_CALL", "echo", { text: "sum is 15" }],
    ]);
    expect(steps.every((s) => s.startTime && s.endTime && s.skillId === skillId)).toBe(true);
  });

  it("fails the run when a tool reports isError", async () => {
    const run = await runTool(skillId, "fail", "{}");
    expect(run.status).toBe("RUN_STATUS_FAILED");
    expect(((run.steps as Json[])[0]!.error as string)).toContain("tool_error");
    expect(run.error).toContain("fail");
  });

  it("times a run out at the agent's timeout", async () => {
    const agent = (await must("CreateAgent", { agent: { name: "slowpoke", skillIds: [skillId], timeout: "0.3s", steps: [{ skillId, tool: "slow", arguments: '{"ms": 5000}' }] } })).agent as Json;
    const run = await waitForRun(((await must("RunAgent", { id: agent.id })).run as Json).id as string);
    expect(run.status).toBe("RUN_STATUS_TIMED_OUT");
  });

  it("drives a model agent through two tool calls to a final answer", async () => {
    const model = await startModelServer([
      { toolCalls: [{ name: "tools__echo", arguments: { text: "looked up" } }] },
      { toolCalls: [{ name: "tools__add", arguments: { a: 20, b: 22 } }] },
      { content: "The answer is 42." },
    ]);
    try {
      const agent = (await must("CreateAgent", {
        agent: { name: "assistant", instructions: "Be brief.", skillIds: [skillId], model: { baseUrl: model.baseUrl, model: "scripted-1", apiKey: "sk-model-key" } },
      })).agent as Json;
      expect((agent.model as Json).apiKeySet).toBe(true);
      const run = await waitForRun(((await must("RunAgent", { id: agent.id, input: { question: "6 x 7?" } })).run as Json).id as string);
      expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: "The answer is 42." });
      expect((run.steps as Json[]).map((s) => [s.kind, s.tool])).toEqual([
        ["STEP_KIND_MODEL_CALL", "scripted-1"],
        ["STEP_KIND_TOOL_CALL", "echo"],
        ["STEP_KIND_MODEL_CALL", "scripted-1"],
        ["STEP_KIND_TOOL_CALL", "add"],
        ["STEP_KIND_MODEL_CALL", "scripted-1"],
      ]);
      const requests = model.requests();
      expect(model.authorizations()).toEqual(["Bearer sk-model-key", "Bearer sk-model-key", "Bearer sk-model-key"]);
      expect(requests[0]!.messages.slice(0, 2)).toEqual([
        { role: "system", content: "Be brief." },
        { role: "user", content: '{"question":"6 x 7?"}' },
      ]);
      expect(requests[0]!.tools!.map((t) => t.function.name).sort()).toEqual(["tools__add", "tools__echo", "tools__fail", "tools__slow", "tools__track"]);
      expect(requests[2]!.messages.at(-1)).toMatchObject({ role: "tool", content: '{"sum":42}' });
    } finally {
      await model.close();
    }
  });

  it("takes an event from a webhook through a trigger and a run to a tool call", async () => {
    const agent = (await must("CreateAgent", {
      agent: { name: "on-order", skillIds: [skillId], steps: [{ skillId, tool: "echo", arguments: '{"text": "order " & event.payload.id & " for " & $string(event.payload.total)}' }] },
    })).agent as Json;
    const source = await must("CreateWebhookSource", { webhookSource: { name: "shop" } });
    await must("CreateTrigger", { trigger: { agentId: agent.id, webhook: { eventTypePattern: "order.*", filter: "payload.total > 100" } } });
    const res = await fetch(`${server.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": source.token as string },
      body: JSON.stringify({ event_type: "order.created", payload: { id: "o-77", total: 250 } }),
    });
    expect(res.status).toBe(202);
    const { event_id } = (await res.json()) as { event_id: string };
    const event = (await must("GetEvent", { id: event_id })).event as Json;
    const run = await waitForRun((event.runIds as string[])[0]!);
    expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", eventId: event_id, output: { text: "order o-77 for 250" } });
    expect(open.toolCalls().at(-1)).toEqual({ name: "echo", arguments: { text: "order o-77 for 250" } });
  });
});
