// Resource behaviour through the REST mirror and Connect, as an operator
// would use them: validation naming the field, pagination, field masks,
// write-only secrets sealed at rest, webhook tokens shown once.
import Database from "better-sqlite3";
import { join } from "node:path";
import { createHash } from "node:crypto";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";

type Json = Record<string, unknown>;

describe("resources", () => {
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

  async function rest(method: string, path: string, body?: unknown, tenant = "acme"): Promise<{ status: number; body: Json }> {
    const res = await fetch(`${server.url}/api/v1${path}`, {
      method,
      headers: { ...bearer(token, tenant), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
  }

  const rawDb = () => new Database(join(server.dir, "agentplane.db"), { readonly: true });

  describe("agents over REST", () => {
    it("creates, reads, updates with a mask, lists and deletes", async () => {
      const created = await rest("POST", "/agents", { agent: { name: "triage", description: "first", maxSteps: 4, model: PLACEHOLDER_MODEL } });
      expect(created.status).toBe(201);
      const agent = created.body.agent as Json;
      expect(agent).toMatchObject({ name: "triage", description: "first", maxSteps: 4, timeout: "120s", enabled: true, tenant: "acme" });
      const id = agent.id as string;

      expect((await rest("GET", `/agents/${id}`)).body).toEqual({ agent });

      const patched = await rest("PATCH", `/agents/${id}?update_mask=description`, { agent: { name: "ignored", description: "second" } });
      expect(patched.status).toBe(200);
      expect(patched.body.agent).toMatchObject({ name: "triage", description: "second" });

      // Without a mask, the fields the body sets are updated.
      const implied = await rest("PATCH", `/agents/${id}`, { agent: { enabled: false } });
      expect(implied.body.agent).toMatchObject({ name: "triage", description: "second", enabled: false });

      const bad = await rest("PATCH", `/agents/${id}?update_mask=create_time`, { agent: {} });
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ code: "invalid_argument", message: expect.stringContaining('"create_time" is not updatable') });

      expect((await rest("DELETE", `/agents/${id}`)).status).toBe(200);
      expect(await rest("GET", `/agents/${id}`)).toEqual({
        status: 404,
        body: { code: "not_found", message: `agent "${id}" not found` },
      });
    });

    it("names the invalid field", async () => {
      const cases: [unknown, string][] = [
        [{ agent: {} }, "agent.name: is required"],
        [{ agent: { name: "x", skillIds: ["skl_nope"] } }, "agent.skill_ids[0]"],
        [{ agent: { name: "x", maxSteps: -1 } }, "agent.max_steps"],
        [{ agent: { name: "x", model: { baseUrl: "ftp://m", model: "m" } } }, "agent.model.base_url"],
        [{ agent: { name: "x", timeout: "-5s" } }, "agent.timeout"],
      ];
      for (const [body, field] of cases) {
        const res = await rest("POST", "/agents", body);
        expect(res.status).toBe(400);
        expect(res.body.code).toBe("invalid_argument");
        expect(res.body.message).toContain(field);
      }
    });

    it("refuses a body that is not JSON, and unknown fields", async () => {
      const res = await fetch(`${server.url}/api/v1/agents`, {
        method: "POST",
        headers: { ...bearer(token, "acme"), "content-type": "application/json" },
        body: "{not json",
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).code).toBe("invalid_argument");
      const unknown = await rest("POST", "/agents", { agent: { name: "x", colour: "red" } });
      expect(unknown.status).toBe(400);
      expect(unknown.body.message).toContain("colour");
    });

    it("pages newest first with opaque tokens", async () => {
      for (let i = 0; i < 5; i++) await rest("POST", "/agents", { agent: { name: `page-${i}`, model: PLACEHOLDER_MODEL } }, "globex");
      const first = await rest("GET", "/agents?page_size=2", undefined, "globex");
      expect((first.body.agents as Json[]).map((a) => a.name)).toEqual(["page-4", "page-3"]);
      const second = await rest("GET", `/agents?page_size=2&page_token=${first.body.nextPageToken as string}`, undefined, "globex");
      expect((second.body.agents as Json[]).map((a) => a.name)).toEqual(["page-2", "page-1"]);
      const third = await rest("GET", `/agents?page_size=2&page_token=${second.body.nextPageToken as string}`, undefined, "globex");
      expect((third.body.agents as Json[]).map((a) => a.name)).toEqual(["page-0"]);
      expect(third.body.nextPageToken).toBeUndefined();
      const bogus = await rest("GET", "/agents?page_token=garbage", undefined, "globex");
      expect(bogus).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
      const unknownParam = await rest("GET", "/agents?colour=red", undefined, "globex");
      expect(unknownParam).toMatchObject({ status: 400, body: { message: "colour: unknown query parameter for ListAgents" } });
    });
  });

  describe("skills", () => {
    it("keeps secrets write-only and sealed at rest", async () => {
      const secret = "s3cr3t-client-secret-value";
      const created = await rest("POST", "/skills", {
        skill: {
          name: "crm",
          mcpUrl: "https://crm.example.com/mcp",
          auth: { oauth: { issuer: "https://auth.example.com", clientId: "agentplane", clientSecret: secret, scopes: ["mcp:crm"] } },
        },
      });
      expect(created.status).toBe(201);
      const skill = created.body.skill as { id: string; auth: { oauth: Json } };
      expect(skill.auth.oauth).toEqual({
        issuer: "https://auth.example.com",
        clientId: "agentplane",
        scopes: ["mcp:crm"],
        clientSecretSet: true,
      });
      expect(JSON.stringify((await rest("GET", `/skills/${skill.id}`)).body)).not.toContain(secret);

      // Updating scopes alone keeps the stored secret.
      const updated = await rest("PATCH", `/skills/${skill.id}?update_mask=auth`, {
        skill: { auth: { oauth: { issuer: "https://auth.example.com", clientId: "agentplane", scopes: ["mcp:crm", "mcp:crm.write"] } } },
      });
      expect(updated.status).toBe(200);
      expect((updated.body.skill as { auth: { oauth: Json } }).auth.oauth).toMatchObject({ clientSecretSet: true });

      const db = rawDb();
      const row = db.prepare("select * from skills where id = ?").get(skill.id) as Record<string, string>;
      db.close();
      expect(JSON.stringify(row)).not.toContain(secret);
      expect(row.auth_secret).toMatch(/^v1\./);
    });

    it("validates the MCP URL and the auth shape", async () => {
      const noMcp = await rest("POST", "/skills", { skill: { name: "x", mcpUrl: "https://x.example.com/api" } });
      expect(noMcp.body).toMatchObject({ code: "invalid_argument", message: "skill.mcp_url: path must end in /mcp" });
      const noToken = await rest("POST", "/skills", { skill: { name: "x", mcpUrl: "https://x.example.com/mcp", auth: { staticBearer: {} } } });
      expect(noToken.body.message).toBe("skill.auth.static_bearer.token: is required");
    });

    it("refuses to delete a skill an agent uses", async () => {
      const skill = (await rest("POST", "/skills", { skill: { name: "s", mcpUrl: "http://s.example.com/mcp" } })).body.skill as Json;
      const agent = (await rest("POST", "/agents", { agent: { name: "uses", skillIds: [skill.id], model: PLACEHOLDER_MODEL } })).body.agent as Json;
      const res = await rest("DELETE", `/skills/${skill.id as string}`);
      expect(res).toMatchObject({ status: 400, body: { code: "failed_precondition" } });
      expect(res.body.message).toContain(agent.id as string);
    });
  });

  describe("webhook sources", () => {
    it("shows the token once and stores only its digest", async () => {
      const created = await connectCall(server, "CreateWebhookSource", { webhookSource: { name: "github" } }, bearer(token, "acme"));
      expect(created.status).toBe(200);
      const tokenValue = created.body.token as string;
      expect(tokenValue).toMatch(/^whk_[A-Za-z0-9_-]{43,}$/);
      const source = created.body.webhookSource as Json;
      const got = await connectCall(server, "GetWebhookSource", { id: source.id }, bearer(token, "acme"));
      expect(JSON.stringify(got.body)).not.toContain(tokenValue);
      expect(got.body).toEqual({ webhookSource: source });

      const db = rawDb();
      const row = db.prepare("select token_digest from webhook_sources where id = ?").get(source.id) as { token_digest: string };
      db.close();
      expect(row.token_digest).toBe(createHash("sha256").update(tokenValue).digest("hex"));
    });

    it("rotates with a grace period, or revokes at once with zero", async () => {
      const source = (await connectCall(server, "CreateWebhookSource", { webhookSource: { name: "rot" } }, bearer(token, "acme"))).body
        .webhookSource as Json;
      const rotated = await connectCall(server, "RotateWebhookSourceToken", { id: source.id }, bearer(token, "acme"));
      expect(rotated.body.token).toMatch(/^whk_/);
      const expire = Date.parse((rotated.body.webhookSource as Json).previousTokenExpireTime as string);
      expect(expire - Date.now()).toBeGreaterThan(23.9 * 3600_000);
      const revoked = await connectCall(server, "RotateWebhookSourceToken", { id: source.id, gracePeriod: "0s" }, bearer(token, "acme"));
      expect((revoked.body.webhookSource as Json).previousTokenExpireTime).toBeUndefined();
    });
  });

  describe("triggers", () => {
    let agentId: string;
    beforeAll(async () => {
      agentId = ((await rest("POST", "/agents", { agent: { name: "triggered", model: PLACEHOLDER_MODEL } })).body.agent as Json).id as string;
    });

    it("accepts webhook, schedule and manual triggers", async () => {
      for (const kind of [
        { webhook: { eventTypePattern: "order.*", filter: "payload.total > 100" } },
        { schedule: { cron: "*/5 * * * *", timezone: "Europe/Paris" } },
        { manual: {} },
      ]) {
        const res = await rest("POST", "/triggers", { trigger: { agentId, ...kind } });
        expect(res.status).toBe(201);
        expect(res.body.trigger).toMatchObject({ agentId, enabled: true, ...kind });
      }
      const listed = await rest("GET", `/triggers?agent_id=${agentId}`);
      expect((listed.body.triggers as Json[]).length).toBe(3);
    });

    it("refuses invalid patterns, cron and JSONata at create time", async () => {
      const cases: [Json, string][] = [
        [{ webhook: { eventTypePattern: "github.**.push" } }, "trigger.webhook.event_type_pattern"],
        [{ webhook: { eventTypePattern: "order.created", filter: "payload.(" } }, "trigger.webhook.filter: invalid JSONata"],
        [{ schedule: { cron: "every tuesday" } }, "trigger.schedule.cron"],
        [{ schedule: { cron: "* * * * *", timezone: "Mars/Olympus" } }, "trigger.schedule.timezone"],
        [{}, "one of webhook, schedule or manual is required"],
      ];
      for (const [kind, message] of cases) {
        const res = await rest("POST", "/triggers", { trigger: { agentId, ...kind } });
        expect(res.status).toBe(400);
        expect(res.body.message).toContain(message);
      }
    });

    it("keeps an agent with triggers from being deleted", async () => {
      const res = await rest("DELETE", `/agents/${agentId}`);
      expect(res).toMatchObject({ status: 400, body: { code: "failed_precondition" } });
    });
  });

  describe("runs", () => {
    it("queues a manual run and cancels it", async () => {
      const agent = (await rest("POST", "/agents", { agent: { name: "runnable", model: PLACEHOLDER_MODEL } })).body.agent as Json;
      const queued = await rest("POST", `/agents/${agent.id as string}/run`, { input: { ticket: 42 } });
      expect(queued.status).toBe(200);
      const run = queued.body.run as Json;
      expect(run).toMatchObject({ agentId: agent.id, status: "RUN_STATUS_QUEUED", input: { ticket: 42 } });
      const cancelled = await rest("POST", `/runs/${run.id as string}/cancel`);
      expect(cancelled.body.run).toMatchObject({ status: "RUN_STATUS_CANCELLED" });
      const again = await rest("POST", `/runs/${run.id as string}/cancel`);
      expect(again).toMatchObject({ status: 400, body: { code: "failed_precondition" } });
      const listed = await rest("GET", `/runs?agent_id=${agent.id as string}&status=RUN_STATUS_CANCELLED`);
      expect((listed.body.runs as Json[]).map((r) => r.id)).toEqual([run.id]);
    });
  });
});
