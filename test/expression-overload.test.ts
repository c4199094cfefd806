// A trigger filter the machine's load cut off (its sandbox process got no
// CPU until the wall ceiling) is not the trigger's failure nor the sender's:
// the webhook is refused with 503 and Retry-After, nothing of it is stored,
// the trigger is not charged, and the sender's retry matches as usual.
import { sandboxPids, starve } from "./support/sandbox-processes.js";
import { startTenantServer, tenantWebhooks, type TenantServer } from "./support/tenant-webhooks.js";

type Json = Record<string, unknown>;

let ctx: TenantServer;
let before: number[];
const { must, tenantWithSource, trigger } = tenantWebhooks(() => ctx);

beforeAll(async () => {
  before = sandboxPids();
  // Every filter in a process (no inline slice), one of them, a 10 ms budget:
  // stopped, it is cut off at the wall ceiling within a second.
  ctx = await startTenantServer({ sandbox: { inlineSliceMs: 0, workers: 1 }, filter: { budgetMs: 10 } });
});
afterAll(() => ctx.server.close());

async function post(token: string, key: string, body: unknown) {
  const res = await fetch(`${ctx.server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token, "idempotency-key": key },
    body: JSON.stringify(body),
  });
  return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as Json };
}

it("refuses a webhook whose filter the machine's load cut off with 503 and Retry-After, stores nothing, and matches its retry", async () => {
  const { token, agentId } = await tenantWithSource("busy");
  const triggerId = await trigger("busy", agentId, "order.*", "payload.n > 0");
  const event = { event_type: "order.created", payload: { n: 1 } };
  expect(await post(token, "warm", event)).toMatchObject({ status: 202, body: { matched_triggers: 1 } });

  const resume = starve(before);
  let refused;
  try {
    refused = await post(token, "k-1", event);
  } finally {
    resume();
  }
  expect(refused.status).toBe(503);
  expect(refused.retryAfter).toBe("1");
  expect(refused.body.message).toContain("the service is overloaded: this event's trigger filters could not be evaluated in time; retry later");
  const listed = (await must("ListEvents", {}, "busy")).events as Json[];
  expect(listed).toHaveLength(1);
  const saved = (await must("GetTrigger", { id: triggerId }, "busy")).trigger as Json;
  expect(saved.filterError ?? "").toBe("");

  // The sender's retry, once the machine has a core for it again.
  expect(await post(token, "k-1", event)).toMatchObject({ status: 202, body: { matched_triggers: 1 } });
  expect((await must("ListEvents", {}, "busy")).events as Json[]).toHaveLength(2);
});
