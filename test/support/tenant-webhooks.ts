// Tenants with a webhook source and an agent on one test server, for suites
// about what one tenant's expressions cost the others: each call as the dev
// issuer's admin, webhooks posted with their time, /healthz polled around work.
import type { DevIssuer } from "../../src/integrations/identity/dev-issuer.js";
import { PLACEHOLDER_MODEL } from "./agents.js";
import { bearer, connectCall, type TestServer } from "./server.js";

type Json = Record<string, unknown>;

export interface Posted {
  status: number;
  body: Json;
  ms: number;
}

export function tenantWebhooks(server: () => TestServer, issuer: () => DevIssuer, admin: () => string) {
  async function must(method: string, body: unknown, tenant: string): Promise<Json> {
    const res = await connectCall(server(), method, body, bearer(admin(), tenant));
    if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  async function post(token: string, body: unknown): Promise<Posted> {
    const started = Date.now();
    const res = await fetch(`${server().url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": token },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json, ms: Date.now() - started };
  }

  // Polls /healthz every 20 ms while `work` runs (each answer must be 200:
  // the process is there); returns how many answers came and the slowest.
  async function healthzAround<T>(work: () => Promise<T>): Promise<{ result: T; answers: number; slowestMs: number }> {
    let answers = 0;
    let slowestMs = 0;
    let done = false;
    const poll = (async () => {
      while (!done) {
        const started = Date.now();
        const res = await fetch(`${server().url}/healthz`);
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        answers++;
        slowestMs = Math.max(slowestMs, Date.now() - started);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      return { result: await work(), answers, slowestMs };
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

  // Runs the agent once with `input` and answers the run once it has ended.
  async function runToEnd(agentId: unknown, input: unknown, tenant: string, timeoutMs: number): Promise<Json> {
    const queued = (await must("RunAgent", { id: agentId, input }, tenant)).run as Json;
    for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 25))) {
      const run = (await must("GetRun", { id: queued.id }, tenant)).run as Json;
      if (!["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string)) return run;
    }
    throw new Error(`run ${String(queued.id)} did not end within ${timeoutMs} ms`);
  }

  return { must, post, healthzAround, tenantWithSource, trigger, runToEnd };
}
