// The REST mirror's OpenAPI document: valid OpenAPI 3.1 (checked by a real
// validator), one operation per derived route with the scope and tenant rules
// the authorizer applies, output-only fields marked, and real responses of the
// running server valid against the schemas it publishes.
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { Access } from "../gen/platform/v1/options_pb.js";
import { PlatformService } from "../gen/platform/v1/platform_service_pb.js";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { requiredScopes, ruleOf } from "../src/service/access.js";
import { openApiDocument, type OpenApiDocument } from "../src/surfaces/rest/openapi.js";
import { deriveRestRoutes } from "../src/surfaces/rest/rest-routes.js";
import { VERSION } from "../src/version.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, startServer, type TestServer } from "./support/server.js";

type Json = Record<string, unknown>;

let issuer: DevIssuer;
let server: TestServer;
let token: string;
let served: OpenApiDocument;

beforeAll(async () => {
  issuer = await devIssuer();
  server = await startServer({ authenticator: issuer.authenticator(60) });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
  token = await devToken(issuer);
  const res = await fetch(`${server.url}/api/v1/openapi.json`); // no token
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  served = (await res.json()) as OpenApiDocument;
});
afterAll(() => server.close());

const operations = (doc: OpenApiDocument) =>
  Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([verb, op]) => ({ path, verb, op })));

it("serves, without a token, the document derived from the descriptor", () => {
  expect(served).toEqual(openApiDocument(PlatformService, VERSION));
  expect(served.openapi).toBe("3.1.0");
});

it("is a valid OpenAPI 3.1 document", async () => {
  const result = await new Validator().validate(served as Record<string, unknown>);
  expect(result.errors).toBeUndefined();
  expect(result.valid).toBe(true);
});

it("has one operation per derived route, with its method, path and success status", () => {
  const routes = deriveRestRoutes(PlatformService);
  expect(operations(served)).toHaveLength(routes.length);
  for (const route of routes) {
    const op = served.paths[route.path.replace(":id", "{id}")]?.[route.verb.toLowerCase()];
    expect(op?.operationId).toBe(route.method.name);
    expect(Object.keys(op!.responses)).toContain(String(route.successStatus));
  }
  const update = served.paths["/api/v1/agents/{id}"]!.patch!;
  expect(update.parameters).toEqual(
    expect.arrayContaining([
      expect.objectContaining({ name: "id", in: "path", required: true }),
      expect.objectContaining({ name: "update_mask", in: "query" }),
    ]),
  );
  expect(update.requestBody).toMatchObject({
    content: { "application/json": { schema: { properties: { agent: { $ref: "#/components/schemas/Agent" } }, required: ["agent"] } } },
  });
  const listEvents = served.paths["/api/v1/events"]!.get!;
  expect(listEvents.parameters.map((p) => p.name)).toEqual(
    expect.arrayContaining(["page_size", "page_token", "source_id", "event_type", "receive_time_after", "receive_time_before"]),
  );
  expect(listEvents.requestBody).toBeUndefined();
  expect(served.paths["/api/v1/runs"]!.get!.parameters).toContainEqual(
    expect.objectContaining({ name: "status", in: "query", schema: { $ref: "#/components/schemas/RunStatus" } }),
  );
  // The path gives `id`: RunAgent's body is only its input.
  const run = served.paths["/api/v1/agents/{id}/run"]!.post!;
  expect(Object.keys((run.requestBody as { content: { "application/json": { schema: { properties: Json } } } }).content["application/json"].schema.properties)).toEqual(["input"]);
  expect(Object.keys(run.responses)).toEqual(["200", "400", "401", "403", "404", "413", "429", "503"]);
  expect(Object.keys(served.paths["/api/v1/agents"]!.get!.responses)).toEqual(["200", "400", "401", "403", "503"]);
  expect(Object.keys(served.paths["/api/v1/agents"]!.post!.responses)).toEqual(["201", "400", "401", "403", "409", "413", "429", "503"]);
});

it("states the scope of every operation by the authorizer's rule, and the tenant header where a tenant is selected", () => {
  for (const route of deriveRestRoutes(PlatformService)) {
    const op = served.paths[route.path.replace(":id", "{id}")]![route.verb.toLowerCase()]!;
    const rule = ruleOf(route.method);
    expect(op.security).toEqual(requiredScopes("api", rule).map((s) => ({ bearer: [s] })));
    const tenantless = rule.access === Access.PLATFORM_ADMIN || rule.access === Access.CALLER;
    expect(op.parameters.some((p) => p.$ref === "#/components/parameters/Tenant")).toBe(!tenantless);
  }
  expect(served.paths["/api/v1/tenants"]!.get!.security).toEqual([{ bearer: ["platform:admin"] }]);
  expect(served.paths["/api/v1/agents"]!.get!.security).toEqual([{ bearer: ["platform:read"] }, { bearer: ["platform:write"] }]);
  expect(served.paths["/api/v1/agents"]!.post!.security).toEqual([{ bearer: ["platform:write"] }]);
  expect(served.components.securitySchemes).toMatchObject({ bearer: { type: "http", scheme: "bearer" } });
  expect(served.components.parameters).toMatchObject({ Tenant: { name: "X-Platform-Tenant", in: "header", required: true } });
});

it("marks output-only fields readOnly and secrets writeOnly, with the proto comments as descriptions", () => {
  const props = (name: string) => (served.components.schemas[name] as { properties: Record<string, Json> }).properties;
  for (const field of ["id", "tenant", "createTime", "updateTime"]) expect(props("Agent")[field]).toMatchObject({ readOnly: true });
  expect(props("Agent").name!.readOnly).toBeUndefined();
  expect(props("Agent").instructions).toEqual({ type: "string", description: "System message of a model agent." });
  expect(props("ModelConfig").apiKeySet).toMatchObject({ type: "boolean", readOnly: true });
  expect(props("ModelConfig").apiKey).toMatchObject({ writeOnly: true });
  expect(props("StaticBearerAuth").tokenSet).toMatchObject({ readOnly: true });
  expect(props("OAuthClientCredentials").clientSecretSet).toMatchObject({ readOnly: true });
  for (const field of ["tools", "toolsRefreshTime", "toolsRefreshError"]) expect(props("Skill")[field]).toMatchObject({ readOnly: true });
  expect(props("WebhookSource").previousTokenExpireTime).toMatchObject({ type: "string", format: "date-time", readOnly: true });
  for (const field of ["matchedTriggerIds", "runIds"]) expect(props("Event")[field]).toMatchObject({ readOnly: true });
  for (const field of ["status", "attempt", "steps", "output", "error", "startTime", "endTime"]) expect(props("Run")[field]).toMatchObject({ readOnly: true });
  expect(props("Trigger").filterError).toMatchObject({ readOnly: true });
  // Well-known types in their proto3 JSON forms.
  expect(props("Agent").timeout).toMatchObject({ type: "string", pattern: expect.any(String) });
  expect(props("Event").payload).toMatchObject({ type: "object" });
  expect(props("Run").input).not.toHaveProperty("type");
  expect(props("UpdateAgentRequest").updateMask).toMatchObject({ type: "string" });
  expect(served.components.schemas.RunStatus).toMatchObject({ type: "string", enum: expect.arrayContaining(["RUN_STATUS_FAILED"]) });
});

describe("real responses against the published schemas", () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  let check: (operation: { path: string; verb: string }, status: number, body: unknown) => void;

  beforeAll(() => {
    ajv.addSchema(served as object, "openapi.json");
    check = ({ path, verb }, status, body) => {
      const response = served.paths[path]![verb]!.responses[String(status)] as { content: { "application/json": { schema: Json } } };
      expect(response).toBeDefined();
      const pointer = `openapi.json#/paths/${path.replaceAll("~", "~0").replaceAll("/", "~1")}/${verb}/responses/${status}/content/application~1json/schema`;
      const validate = ajv.getSchema(pointer)!;
      const valid = validate(body);
      expect(validate.errors ?? []).toEqual([]);
      expect(valid).toBe(true);
    };
  });

  async function rest(method: string, path: string, body?: unknown) {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...bearer(token, "acme"), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json };
  }

  it("validates created, read, listed and run resources and errors", async () => {
    const created = await rest("POST", "/api/v1/agents", { agent: { name: "documented", timeout: "3.5s", model: { baseUrl: "https://models.example/v1", model: "m", apiKey: "sk-x" } } });
    expect(created.status).toBe(201);
    check({ path: "/api/v1/agents", verb: "post" }, 201, created.body);
    const id = (created.body.agent as Json).id as string;

    const read = await rest("GET", `/api/v1/agents/${id}`);
    expect(read.status).toBe(200);
    check({ path: "/api/v1/agents/{id}", verb: "get" }, 200, read.body);
    expect((read.body.agent as { model: Json }).model).toMatchObject({ apiKeySet: true });

    const listed = await rest("GET", "/api/v1/agents?page_size=5");
    check({ path: "/api/v1/agents", verb: "get" }, 200, listed.body);

    const source = await rest("POST", "/api/v1/webhook-sources", { webhookSource: { name: "documented" } });
    expect(source.status).toBe(201);
    check({ path: "/api/v1/webhook-sources", verb: "post" }, 201, source.body);
    const sourceId = (source.body.webhookSource as Json).id as string;
    const rotated = await rest("POST", `/api/v1/webhook-sources/${sourceId}/rotate-token`, { gracePeriod: "60s" });
    expect(rotated.status).toBe(200);
    check({ path: "/api/v1/webhook-sources/{id}/rotate-token", verb: "post" }, 200, rotated.body);

    const run = await rest("POST", `/api/v1/agents/${id}/run`, { input: { n: 1 } });
    expect(run.status).toBe(200);
    check({ path: "/api/v1/agents/{id}/run", verb: "post" }, 200, run.body);

    const missing = await rest("GET", "/api/v1/agents/agt_missing");
    expect(missing.status).toBe(404);
    check({ path: "/api/v1/agents/{id}", verb: "get" }, 404, missing.body);
    const invalid = await rest("POST", "/api/v1/agents", { agent: { name: "" } });
    expect(invalid.status).toBe(400);
    check({ path: "/api/v1/agents", verb: "post" }, 400, invalid.body);
  });
});
