// A skill's `headers` auth mode (SPEC §5, the seed's "Authorization header
// definition"): a few header name/value pairs sent on every request to the
// customer's MCP server, values sealed at rest and write-only, names checked
// against the headers the transport owns. Through Connect and REST against
// real MCP SDK servers that check the headers.
import type Database from "better-sqlite3";
import postgres from "postgres";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { authenticatedFetch } from "../src/integrations/mcp-client/auth-fetch.js";
import { AddressPolicy } from "../src/integrations/outbound/address-policy.js";
import { createGuardedFetch } from "../src/integrations/outbound/guarded-fetch.js";
import { startHeadersMcp, startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { LogCapture } from "./support/log-capture.js";
import { bearer, connectCall, connectMust, startServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

type Json = Record<string, unknown>;

const API_KEY = "key-9f2c7e41d0b3";
const BASIC = `Basic ${Buffer.from("agentplane:pa55-w0rd-77").toString("base64")}`;
const NEW_KEY = "key-rotated-5a8e13c6";
// Every value any test below configures: none may show up in logs or rows.
const SECRETS = [API_KEY, BASIC, NEW_KEY, "wrong-key-31f0a9", "Basic cGFzc3dvcmQtb25seQ==", "cGFzc3dvcmQtb25seQ=="];

let issuer: DevIssuer;
let admin: string;
let server: TestServer;
const logs = new LogCapture("debug");

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  server = await startServer({ authenticator: issuer.authenticator(60), outboundAllow: ["127.0.0.0/8"], runtime: { executor: "agents" }, logger: logs.logger });
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

async function rest(method: string, path: string, body?: unknown, on: TestServer = server): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${on.url}/api/v1${path}`, {
    method,
    headers: { ...bearer(admin, "acme"), ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
}

const headersAuth = (headers: { name: string; value?: string }[]) => ({ headers: { headers } });

async function createSkill(name: string, url: string, headers: { name: string; value?: string }[]): Promise<Json> {
  return (await must("CreateSkill", { skill: { name, mcpUrl: url, auth: headersAuth(headers) } })).skill as Json;
}

async function waitForRun(id: string): Promise<Json> {
  return waitFor(`run ${id} to end`, 15_000, async () => {
    const run = (await must("GetRun", { id })).run as Json;
    return ["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string) ? undefined : run;
  }, 25);
}

// Names are unique in a tenant: each agent gets its own.
let agents = 0;
async function runTool(skillId: string, tool: string, args: string): Promise<Json> {
  const agent = (await must("CreateAgent", { agent: { name: `call ${tool} ${++agents}`, skillIds: [skillId], steps: [{ skillId, tool, arguments: args }] } })).agent as Json;
  return waitForRun(((await must("RunAgent", { id: agent.id })).run as Json).id as string);
}

describe("a skill with configured headers", () => {
  // The server's expectations; tests change them as the skill's values change.
  const expected: Record<string, string> = { "X-API-Key": API_KEY, Authorization: BASIC };
  let mcp: CustomerMcp;
  let skillId: string;
  beforeAll(async () => {
    mcp = await startHeadersMcp(expected);
  });
  afterAll(() => mcp.close());

  it("is created with write-only values: reads give the names as written and value_set", async () => {
    const skill = await createSkill("keyed", mcp.url, [
      { name: "X-API-Key", value: API_KEY },
      { name: "Authorization", value: BASIC },
    ]);
    skillId = skill.id as string;
    expect(skill.toolsRefreshError).toBeUndefined();
    expect((skill.tools as Json[]).length).toBe(5);
    const shown = { headers: { headers: [{ name: "X-API-Key", valueSet: true }, { name: "Authorization", valueSet: true }] } };
    expect(skill.auth).toEqual(shown);
    expect((await must("GetSkill", { id: skillId })).skill).toMatchObject({ auth: shown });
    const listed = (await must("ListSkills", {})).skills as Json[];
    expect(listed.find((s) => s.id === skillId)).toMatchObject({ auth: shown });
    const viaRest = await rest("GET", `/skills/${skillId}`);
    expect(viaRest).toMatchObject({ status: 200, body: { skill: { auth: shown } } });
    for (const body of [skill, listed, viaRest.body]) for (const secret of SECRETS) expect(JSON.stringify(body)).not.toContain(secret);
  });

  it("sends the headers on initialize, tools/list and tools/call", async () => {
    const from = mcp.requestLog().length;
    const run = await runTool(skillId, "add", '{"a": 1, "b": 2}');
    expect(run).toMatchObject({ status: "RUN_STATUS_SUCCEEDED", output: { sum: 3 } });
    // The create-time listing and the run's calls.
    const sent = mcp.requestLog();
    const methods = sent.flatMap((r) => r.rpcMethods);
    for (const m of ["initialize", "tools/list", "tools/call"]) expect(methods).toContain(m);
    expect(sent.slice(from).flatMap((r) => r.rpcMethods)).toContain("tools/call");
    for (const r of sent) expect([r.httpMethod, r.rpcMethods, r.headers["x-api-key"], r.headers.authorization]).toEqual([r.httpMethod, r.rpcMethods, API_KEY, BASIC]);
    expect(mcp.authorizedRequests()).toBe(mcp.requests());
  });

  it("keeps a stored value when an update leaves it empty, matched by name in any case, and changes the other", async () => {
    const updated = await must("UpdateSkill", {
      skill: { id: skillId, auth: headersAuth([{ name: "x-api-key", value: NEW_KEY }, { name: "AUTHORIZATION" }]) },
      updateMask: "auth",
    });
    expect((updated.skill as Json).auth).toEqual({ headers: { headers: [{ name: "x-api-key", valueSet: true }, { name: "AUTHORIZATION", valueSet: true }] } });
    delete expected["X-API-Key"];
    delete expected.Authorization;
    Object.assign(expected, { "x-api-key": NEW_KEY, authorization: BASIC });
    const refreshed = await api("RefreshSkillTools", { id: skillId });
    expect(refreshed.status).toBe(200);
    const last = mcp.requestLog().at(-1)!;
    expect([last.headers["x-api-key"], last.headers.authorization]).toEqual([NEW_KEY, BASIC]);
  });

  it("keeps every value when an update resends only the names (REST)", async () => {
    const res = await rest("PATCH", `/skills/${skillId}?update_mask=auth`, { skill: { auth: headersAuth([{ name: "x-api-key" }, { name: "Authorization", value: "" }]) } });
    expect(res.status).toBe(200);
    expect((res.body.skill as Json).auth).toEqual({ headers: { headers: [{ name: "x-api-key", valueSet: true }, { name: "Authorization", valueSet: true }] } });
    expect((await api("RefreshSkillTools", { id: skillId })).status).toBe(200);
  });

  it("drops a header left out of an update, and refuses an empty value for a name it has no value for", async () => {
    const res = await api("UpdateSkill", { skill: { id: skillId, auth: headersAuth([{ name: "x-api-key" }, { name: "X-Tenant" }]) }, updateMask: "auth" });
    expect(res).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
    expect(res.body.message).toBe("skill.auth.headers.headers[1].value: is required");
    const dropped = await must("UpdateSkill", { skill: { id: skillId, auth: headersAuth([{ name: "x-api-key" }]) }, updateMask: "auth" });
    expect((dropped.skill as Json).auth).toEqual({ headers: { headers: [{ name: "x-api-key", valueSet: true }] } });
    delete expected.authorization;
    const from = mcp.requestLog().length;
    expect((await api("RefreshSkillTools", { id: skillId })).status).toBe(200);
    for (const r of mcp.requestLog().slice(from)) expect([r.headers["x-api-key"], r.headers.authorization]).toEqual([NEW_KEY, undefined]);
  });

  it("needs every value again when the mode changes to headers", async () => {
    const bearerSkill = (await must("CreateSkill", { skill: { name: "was-bearer", mcpUrl: mcp.url, auth: { staticBearer: { token: "wrong-key-31f0a9" } } } })).skill as Json;
    const res = await api("UpdateSkill", { skill: { id: bearerSkill.id, auth: headersAuth([{ name: "Authorization" }]) }, updateMask: "auth" });
    expect(res).toMatchObject({ status: 400, body: { code: "invalid_argument", message: "skill.auth.headers.headers[0].value: is required" } });
  });

  it("turns the server's 401 into skill_unauthorized at once, without retries, and never quotes the values back", async () => {
    const careless = await startHeadersMcp({ "X-API-Key": API_KEY }, { quoteRefused: true });
    try {
      const skill = await createSkill("refused", careless.url, [{ name: "X-API-Key", value: "wrong-key-31f0a9" }]);
      expect(skill.toolsRefreshError).toContain("skill_unauthorized");
      const before = careless.requests();
      const run = await runTool(skill.id as string, "echo", '{"text": "x"}');
      expect(run.status).toBe("RUN_STATUS_FAILED");
      const step = (run.steps as Json[])[0]!;
      expect(step.error).toContain("skill_unauthorized");
      expect(step.error).toContain("-32000");
      expect(careless.requests() - before).toBe(1);
      for (const text of [skill.toolsRefreshError, step.error, run.error]) expect(text).not.toContain("wrong-key-31f0a9");
    } finally {
      await careless.close();
    }
  });

  it("does not carry the headers along a redirect to another origin", async () => {
    const elsewhere = await startOpenMcp();
    const redirecting = await startHeadersMcp({ "X-API-Key": API_KEY }, { redirect: { method: "GET", to: elsewhere.url } });
    try {
      const skill = await createSkill("redirecting", redirecting.url, [{ name: "X-API-Key", value: API_KEY }]);
      expect(skill.toolsRefreshError).toBeUndefined();
      const run = await runTool(skill.id as string, "echo", '{"text": "x"}');
      expect(run.status).toBe("RUN_STATUS_SUCCEEDED");
      // The SDK opens its GET stream after initialize, in the background; it
      // is redirected. (The patched SDK follows only within the origin; the
      // guard would drop the headers anyway: see the next test.)
      await waitFor("the GET stream to be redirected", 10_000, async () => (redirecting.redirects() > 0 ? true : undefined), 10);
      await new Promise((r) => setTimeout(r, 300));
      for (const r of elsewhere.requestLog()) expect([r.httpMethod, r.headers["x-api-key"]]).toEqual(["GET", undefined]);
    } finally {
      await redirecting.close();
      await elsewhere.close();
    }
  });

  it("loses the headers when the outbound guard follows a GET to another origin, keeps them within the origin", async () => {
    // The composition the skill client uses: headers added above the guard.
    const guard = createGuardedFetch({ policy: new AddressPolicy(["127.0.0.0/8"]), maxResponseBytes: 1 << 20 });
    const fetchWithHeaders = authenticatedFetch(guard, { mode: "headers", headers: { "X-API-Key": API_KEY, Authorization: BASIC } });
    const elsewhere = await startOpenMcp();
    const redirecting = await startHeadersMcp({ "X-API-Key": API_KEY }, { redirect: { method: "GET", to: elsewhere.url } });
    const sameOrigin = await startHeadersMcp({ "X-API-Key": API_KEY }, { redirect: { method: "GET", to: "/mcp?moved=1" } });
    try {
      expect((await fetchWithHeaders(redirecting.url, { method: "GET", headers: { accept: "text/event-stream" } })).status).toBe(405);
      expect(redirecting.redirects()).toBe(1);
      expect(elsewhere.requestLog().map((r) => [r.httpMethod, r.headers["x-api-key"], r.headers.authorization, r.headers.accept])).toEqual([
        ["GET", undefined, undefined, "text/event-stream"],
      ]);
      // Within the origin the redirect target is the same server: it sees the headers again (and redirects once more).
      await fetchWithHeaders(sameOrigin.url, { method: "GET" }).catch(() => undefined);
      expect(sameOrigin.requestLog().slice(0, 2).map((r) => r.headers["x-api-key"])).toEqual([API_KEY, API_KEY]);
    } finally {
      await redirecting.close();
      await sameOrigin.close();
      await elsewhere.close();
    }
  });

  it("does not follow a redirected POST anywhere", async () => {
    const elsewhere = await startOpenMcp();
    const redirecting = await startHeadersMcp({ "X-API-Key": API_KEY }, { redirect: { method: "POST", to: elsewhere.url } });
    try {
      const skill = await createSkill("post-redirecting", redirecting.url, [{ name: "X-API-Key", value: API_KEY }]);
      expect(skill.toolsRefreshError).toBeTruthy();
      expect(redirecting.redirects()).toBeGreaterThan(0);
      expect(elsewhere.requests()).toBe(0);
    } finally {
      await redirecting.close();
      await elsewhere.close();
    }
  });
});

describe("refused header configurations", () => {
  const create = (headers: { name: string; value?: string }[]) => api("CreateSkill", { skill: { name: "bad", mcpUrl: "http://127.0.0.1:9/mcp", auth: headersAuth(headers) } });
  const ok = { name: "X-API-Key", value: "v" };

  it.each([
    "Host",
    "Content-Length",
    "content-type",
    "Accept",
    "Transfer-Encoding",
    "Connection",
    "Keep-Alive",
    "TE",
    "Trailer",
    "Upgrade",
    "Proxy-Authorization",
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "Last-Event-ID",
    "traceparent",
    "Tracestate",
  ])("refuses %s, naming the field", async (name) => {
    const res = await create([ok, { name, value: "x" }]);
    expect(res).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
    expect(res.body.message).toBe(`skill.auth.headers.headers[1].name: "${name}" is set by the transport and cannot be configured`);
  });

  it.each(["", "X API Key", "X-Key:", "Ключ", "X-Key\r\nInjected: 1", "a".repeat(101)])("refuses the name %j", async (name) => {
    const res = await create([{ name, value: "x" }]);
    expect(res).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
    expect(res.body.message).toMatch(/^skill\.auth\.headers\.headers\[0\]\.name: /);
  });

  it.each(["abc\r\nX-Injected: 1", "abc\ndef", "abc\rdef", "naïve"])("refuses the value %j", async (value) => {
    const res = await create([ok, { name: "X-Other", value }]);
    expect(res).toMatchObject({ status: 400, body: { code: "invalid_argument", message: "skill.auth.headers.headers[1].value: must be visible ASCII, spaces and tabs" } });
  });

  // NUL is refused in every request string before any resource's own rules.
  it("refuses a value with NUL, as any request string", async () => {
    const res = await create([ok, { name: "X-Other", value: "abc\u0000" }]);
    expect(res).toMatchObject({
      status: 400,
      body: { code: "invalid_argument", message: "skill.auth.headers.headers[1].value: must not contain NUL characters or unpaired UTF-16 surrogates" },
    });
  });

  it("refuses the same name twice, whatever its case", async () => {
    const res = await create([ok, { name: "x-api-KEY", value: "w" }]);
    expect(res).toMatchObject({ status: 400, body: { code: "invalid_argument", message: 'skill.auth.headers.headers[1].name: "x-api-KEY" is given twice' } });
  });

  it("refuses more than 8 headers, and none", async () => {
    const nine = Array.from({ length: 9 }, (_, i) => ({ name: `X-H${i}`, value: "v" }));
    const many = await create(nine);
    expect(many).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
    expect(many.body.message).toMatch(/^skill\.auth\.headers\.headers: .*8/);
    expect((await create(nine.slice(0, 8))).status).toBe(200);
    const none = await create([]);
    expect(none).toMatchObject({ status: 400, body: { code: "invalid_argument", message: "skill.auth.headers.headers: needs at least one header" } });
  });

  it("answers the same over REST", async () => {
    const res = await rest("POST", "/skills", { skill: { name: "bad", mcpUrl: "http://127.0.0.1:9/mcp", auth: headersAuth([{ name: "Host", value: "evil.example" }]) } });
    expect(res).toMatchObject({ status: 400, body: { code: "invalid_argument", message: 'skill.auth.headers.headers[0].name: "Host" is set by the transport and cannot be configured' } });
    const created = await rest("POST", "/skills", { skill: { name: "rest", mcpUrl: "http://127.0.0.1:9/mcp", auth: headersAuth([{ name: "X-API-Key", value: API_KEY }]) } });
    expect(created.status).toBe(201);
    expect((created.body.skill as Json).auth).toEqual({ headers: { headers: [{ name: "X-API-Key", valueSet: true }] } });
  });
});

describe.each(["sqlite", "postgres"] as const)("the stored row (%s)", (engine) => {
  let on: TestServer;
  beforeAll(async () => {
    on = await startServer({ authenticator: issuer.authenticator(60), store: engine, logger: logs.logger });
    await on.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  });
  afterAll(() => on.close());

  it("holds the names in plain and the values sealed", async () => {
    const { skill } = (await must("CreateSkill", { skill: { name: "sealed", mcpUrl: "http://127.0.0.1:9/mcp", auth: headersAuth([{ name: "X-API-Key", value: API_KEY }, { name: "Authorization", value: BASIC }]) } }, on)) as { skill: Json };
    let row: Record<string, unknown>;
    if (engine === "sqlite") {
      const db = (on.store as unknown as { db: { $client: Database.Database } }).db.$client;
      row = db.prepare("select * from skills where id = ?").get(skill.id) as Record<string, unknown>;
    } else {
      const sql = postgres(on.databaseUrl!, { max: 1, onnotice: () => {} });
      try {
        [row] = await sql`select * from skills where id = ${skill.id as string}`;
      } finally {
        await sql.end();
      }
    }
    const auth = typeof row!.auth === "string" ? JSON.parse(row!.auth) : row!.auth;
    expect(auth).toEqual({ mode: "headers", headers: ["X-API-Key", "Authorization"] });
    expect(row!.auth_secret).toMatch(/^v1\.[\w-]+\.[\w-]+\.[\w-]+$/);
    const text = JSON.stringify(row!);
    for (const secret of SECRETS) expect(text).not.toContain(secret);
    expect(text).not.toContain(Buffer.from(API_KEY).toString("base64"));
  });
});

// Last: everything above has been logged by now.
it("never writes a configured value to the logs", () => {
  expect(logs.lines.length).toBeGreaterThan(0);
  for (const secret of SECRETS) expect(logs.raw).not.toContain(secret);
});
