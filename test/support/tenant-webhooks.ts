// Tenants with a webhook source and an agent on one test server, for suites
// about what one tenant's expressions cost the others: each call as the dev
// issuer's admin, webhooks posted with their time, /healthz polled around work.
import type { DevIssuer } from "../../src/integrations/identity/dev-issuer.js";
import { PLACEHOLDER_MODEL } from "./agents.js";
import { startOpenMcp, type CustomerMcp } from "./customer-mcp.js";
import { devIssuer, devToken } from "./dev-auth.js";
import { bearer, connectCall, startServer, type TestServer, type TestServerOptions } from "./server.js";

type Json = Record<string, unknown>;

export interface Posted {
  status: number;
  body: Json;
}

export interface TenantServer {
  issuer: DevIssuer;
  // The dev issuer's client's token, admin of every tenant seeded here.
  admin: string;
  server: TestServer;
}

// A server that runs tenants' expressions under `expressions`' budgets and
// agents' steps (4 at once, skills on loopback), with webhook rate limits
// far above what a suite sends.
export async function startTenantServer(expressions: TestServerOptions["expressions"]): Promise<TenantServer> {
  const issuer = await devIssuer();
  const admin = await devToken(issuer);
  const server = await startServer({
    authenticator: issuer.authenticator(60),
    webhook: { maxBytes: 1024 * 1024, ratePerSecond: 10_000, burst: 10_000 },
    outboundAllow: ["127.0.0.0/8"],
    runtime: { executor: "agents", concurrency: 4 },
    expressions,
  });
  return { issuer, admin, server };
}

export function tenantWebhooks(ctx: () => TenantServer) {
  const server = () => ctx().server;
  const issuer = () => ctx().issuer;
  const admin = () => ctx().admin;

  async function must(method: string, body: unknown, tenant: string): Promise<Json> {
    const res = await connectCall(server(), method, body, bearer(admin(), tenant));
    if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  async function post(token: string, body: unknown): Promise<Posted> {
    const res = await fetch(`${server().url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": token },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json };
  }

  // Polls /healthz every 20 ms while `work` runs (each answer must be 200:
  // the process is there); returns how many answers came.
  async function healthzAround<T>(work: () => Promise<T>): Promise<{ result: T; answers: number }> {
    let answers = 0;
    let done = false;
    const poll = (async () => {
      while (!done) {
        const res = await fetch(`${server().url}/healthz`);
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        answers++;
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      return { result: await work(), answers };
    } finally {
      done = true;
      await poll;
    }
  }

  async function tenantWithSource(slug: string, mapping?: string): Promise<{ token: string; agentId: string }> {
    await server().seedTenant(slug, [{ subject: issuer().clientId, role: "admin" }]);
    const { token } = await must("CreateWebhookSource", { webhookSource: { name: "in", mapping } }, slug);
    const agent = (await must("CreateAgent", { agent: { name: "a", model: PLACEHOLDER_MODEL } }, slug)).agent as Json;
    return { token: token as string, agentId: agent.id as string };
  }

  async function trigger(slug: string, agentId: string, pattern: string, filter?: string): Promise<string> {
    const body = await must("CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: pattern, filter } } }, slug);
    return (body.trigger as Json).id as string;
  }

  // Tenant `slug` with a skill "tools" on a customer MCP server of its own
  // (closed by the caller).
  async function tenantWithSkill(slug: string): Promise<{ mcp: CustomerMcp; skillId: string }> {
    await server().seedTenant(slug, [{ subject: issuer().clientId, role: "admin" }]);
    const mcp = await startOpenMcp();
    const skillId = ((await must("CreateSkill", { skill: { name: "tools", mcpUrl: mcp.url } }, slug)).skill as Json).id as string;
    return { mcp, skillId };
  }

  // Runs the agent once with `input` and answers the run once it has ended.
  async function runToEnd(agentId: unknown, input: unknown, tenant: string, timeoutMs: number): Promise<Json> {
    const queued = (await must("RunAgent", { id: agentId, input }, tenant)).run as Json;
    for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 25))) {
      const run = (await must("GetRun", { id: queued.id }, tenant)).run as Json;
      if (!["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string)) return run;
    }
    throw new Error(`run ${String(queued.id)} did not end within ${timeoutMs} ms`);
  }

  return { must, post, healthzAround, tenantWithSource, tenantWithSkill, trigger, runToEnd };
}
