// Store errors are translated where the service is entered, not in each
// handler: a repository that fails with the store's own error types reaches
// every caller as the API's code, whichever way it came in.
import { create } from "@bufbuild/protobuf";
import { ListTenantsRequestSchema } from "../gen/platform/v1/platform_service_pb.js";
import { StoreConflictError, StoreUnavailableError } from "../src/store/errors.js";
import { PLACEHOLDER_MODEL } from "./support/agents.js";
import { startTwoTenantIdp, type TwoTenantIdp } from "./support/two-tenant-idp.js";
import { bearer, connectCall, type TestServer } from "./support/server.js";

let idp: TwoTenantIdp;
let server: TestServer;
let token: string;

beforeAll(async () => {
  idp = await startTwoTenantIdp();
  token = idp.token.admin!;
  server = await idp.start();
});
afterAll(async () => {
  await server?.close();
  await idp?.idp.stop();
});

// Makes one repository method fail as the store would, until the test ends.
function failing<R extends object>(repo: R, method: keyof R & string, err: Error): () => void {
  const original = repo[method];
  Object.assign(repo, { [method]: () => Promise.reject(err) });
  return () => Object.assign(repo, { [method]: original });
}

it("a unary call answers unavailable when the store is unreachable, on Connect and REST", async () => {
  const restore = failing(server.store.agents, "list", new StoreUnavailableError("connection refused"));
  try {
    const connect = await connectCall(server, "ListAgents", {}, bearer(token, "acme"));
    expect({ status: connect.status, body: connect.body }).toEqual({ status: 503, body: { code: "unavailable", message: "store unavailable" } });
    const rest = await fetch(`${server.url}/api/v1/agents`, { headers: bearer(token, "acme") });
    expect({ status: rest.status, body: await rest.json() }).toEqual({ status: 503, body: { code: "unavailable", message: "store unavailable" } });
  } finally {
    restore();
  }
});

it("a conflict no handler words is already_exists", async () => {
  // A trigger has no name, so its handler words no conflict (an agent's,
  // skill's or source's names the taken name).
  const created = await connectCall(server, "CreateAgent", { agent: { name: "triage", model: PLACEHOLDER_MODEL } }, bearer(token, "acme"));
  const agentId = (created.body.agent as { id: string }).id;
  const restore = failing(server.store.triggers, "insertWithin", new StoreConflictError("unique"));
  try {
    const res = await connectCall(server, "CreateTrigger", { trigger: { agentId, webhook: { eventTypePattern: "order.*" } } }, bearer(token, "acme"));
    expect({ status: res.status, body: res.body }).toEqual({ status: 409, body: { code: "already_exists", message: "already exists" } });
  } finally {
    restore();
  }
});

it("a webhook answers 503 when its token cannot be looked up", async () => {
  const restore = failing(server.store.webhooks, "findSourceByTokenDigest", new StoreUnavailableError("down"));
  try {
    const res = await fetch(`${server.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": `whk_${"a".repeat(43)}` },
      body: JSON.stringify({ event_type: "order.created", payload: {} }),
    });
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 503, body: { error: "unavailable", message: "store unavailable" } });
  } finally {
    restore();
  }
});

it("the operator's calls are translated too", async () => {
  const restore = failing(server.store.tenants, "list", new StoreUnavailableError("down"));
  try {
    await expect(server.app.platform.invokeAsOperator("listTenants", create(ListTenantsRequestSchema, {}))).rejects.toMatchObject({
      rawMessage: "store unavailable",
    });
  } finally {
    restore();
  }
});
