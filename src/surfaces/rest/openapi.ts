// The REST mirror's OpenAPI 3.1 document, derived from the same descriptors
// and route derivation as the routes (rest-routes.ts) and the same access
// rule as the authorizer (service/access.ts): nothing here is listed by hand.
import type { DescEnum, DescField, DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import { Access } from "../../../gen/platform/v1/options_pb.js";
import { requiredScopes, ruleOf } from "../../service/access.js";
import { SLUG } from "../../service/validate.js";
import { describe, fieldSchema, fieldValueSchema, isInputOnly, isOutputOnly, joinText, oneofNote, type JsonSchema, type TypeSchemas } from "../proto-schema/proto-schema.js";
import { deriveRestRoutes, type RestRoute } from "./rest-routes.js";

export type OpenApiDocument = JsonSchema & { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, JsonSchema>; [key: string]: unknown } };

export interface Operation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security: Record<string, string[]>[];
  parameters: JsonSchema[];
  requestBody?: JsonSchema;
  responses: Record<string, JsonSchema>;
  // Not OpenAPI: the scopes that allow the call (any one of them), for the rendered reference.
  "x-scopes": string[];
}

const words = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, "$1 $2");
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const ERROR = "Error";

// The Connect error codes a call can answer besides its success, by the
// method's shape: every call validates, authenticates, authorizes and may
// find the store unavailable; a call naming a record may not find it; writes
// may meet references (failed_precondition) and unique names (Create, Add,
// Update); creating a record meets the tenant's quotas, and queueing runs
// (Run, Replay, Send) the queued-runs cap and the source's rate limit.
function errorCodes(route: RestRoute): Code[] {
  const rule = ruleOf(route.method);
  const name = route.method.name;
  const codes = [Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.Unavailable];
  if (route.idField || rule.access === Access.TENANT_OR_PLATFORM_ADMIN) codes.push(Code.NotFound);
  if (rule.write) codes.push(Code.FailedPrecondition);
  if (/^(Create|Add|Update)/.test(name)) codes.push(Code.AlreadyExists);
  if (/^(Create|Add|Run|Replay|Send)/.test(name)) codes.push(Code.ResourceExhausted);
  return codes;
}

const CODE_NAMES: Record<number, string> = {
  [Code.InvalidArgument]: "invalid_argument",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.Unauthenticated]: "unauthenticated",
  [Code.PermissionDenied]: "permission_denied",
  [Code.NotFound]: "not_found",
  [Code.AlreadyExists]: "already_exists",
  [Code.ResourceExhausted]: "resource_exhausted",
  [Code.Unavailable]: "unavailable",
  [Code.Internal]: "internal",
};

function errorResponses(route: RestRoute, hasBody: boolean): Record<string, JsonSchema> {
  const byStatus = new Map<number, string[]>();
  for (const code of errorCodes(route)) {
    const status = codeToHttpStatus(code);
    byStatus.set(status, [...(byStatus.get(status) ?? []), CODE_NAMES[code]!]);
  }
  // A body over the limit is refused before it is parsed (REST answers 413).
  if (hasBody) byStatus.set(413, ["resource_exhausted"]);
  const responses: Record<string, JsonSchema> = {};
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b))
    responses[String(status)] = {
      description: codes.map((c) => `\`${c}\``).join(", "),
      content: { "application/json": { schema: { ...ref(ERROR), properties: { code: { enum: codes } } } } },
    };
  return responses;
}

const types: TypeSchemas = { message: (m) => ref(m.name), enumeration: (e) => ref(e.name) };

function messageComponent(message: DescMessage): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  for (const field of message.fields) {
    const schema = fieldSchema(field, types);
    if (isOutputOnly(field)) schema.readOnly = true;
    if (isInputOnly(field)) schema.writeOnly = true;
    properties[field.jsonName] = schema;
  }
  const description = joinText(describe(message), oneofNote(message));
  return { type: "object", properties, additionalProperties: false, ...(description ? { description } : {}) };
}

function enumComponent(e: DescEnum): JsonSchema {
  const values = e.values.map((v) => `- \`${v.name}\`${describe(v) ? `: ${describe(v)}` : ""}`).join("\n");
  return { type: "string", enum: e.values.map((v) => v.name), description: joinText(describe(e), values) };
}

// Every platform message and enum the methods reach, by simple name.
function collectTypes(methods: DescMethod[]): { messages: Map<string, DescMessage>; enums: Map<string, DescEnum> } {
  const messages = new Map<string, DescMessage>();
  const enums = new Map<string, DescEnum>();
  const visit = (m: DescMessage) => {
    if (!m.typeName.startsWith("platform.") || messages.get(m.name) === m) return;
    if (messages.has(m.name)) throw new Error(`two messages named ${m.name}`);
    messages.set(m.name, m);
    for (const f of m.fields) {
      if (f.message) visit(f.message);
      if (f.enum) enums.set(f.enum.name, f.enum);
    }
  };
  for (const method of methods) {
    visit(method.input);
    visit(method.output);
  }
  return { messages, enums };
}

// A query string carries one scalar per name: only such fields can be query parameters.
function queryParameter(field: DescField): JsonSchema {
  const scalarLike = field.fieldKind === "scalar" || field.fieldKind === "enum" || (field.fieldKind === "message" && !field.message.typeName.startsWith("platform."));
  if (!scalarLike) throw new Error(`${field.parent.typeName}.${field.name} cannot be a query parameter`);
  const schema = fieldValueSchema(field, types);
  const mask = field.message?.typeName === "google.protobuf.FieldMask";
  const description = mask ? joinText(describe(field), "Comma-separated field paths, snake_case or lowerCamelCase (`display_name,description`).") : describe(field);
  return {
    name: field.name,
    in: "query",
    required: false,
    schema: mask ? { type: "string" } : schema,
    ...(description ? { description } : {}),
  };
}

const TENANT_PARAMETER = { $ref: "#/components/parameters/Tenant" };

function operation(route: RestRoute, tag: string): Operation {
  const method = route.method;
  const rule = ruleOf(method);
  const scopes = requiredScopes("api", rule);
  const pathField = route.idField?.length === 1 ? route.idField[0] : undefined;
  const inQuery = (f: DescField) =>
    route.verb === "GET" || route.verb === "DELETE" || (route.verb === "PATCH" && f.message?.typeName === "google.protobuf.FieldMask");
  const parameters: JsonSchema[] = [];
  if (route.idField) {
    // A request's own `id` field may say more (GetTenant takes a slug too).
    const own = pathField ? describe(method.input.fields.find((f) => f.name === pathField)!) : undefined;
    parameters.push({ name: "id", in: "path", required: true, schema: { type: "string" }, description: own ?? `Id of the ${route.resource?.name ?? "record"}.` });
  }
  const bodyFields: DescField[] = [];
  for (const field of method.input.fields) {
    if (field.name === pathField) continue;
    if (inQuery(field)) parameters.push(queryParameter(field));
    else bodyFields.push(field);
  }
  const tenantless = rule.access === Access.PLATFORM_ADMIN || rule.access === Access.CALLER;
  if (!tenantless) parameters.push(TENANT_PARAMETER);

  const body: JsonSchema = { type: "object", properties: Object.fromEntries(bodyFields.map((f) => [f.jsonName, fieldSchema(f, types)])), additionalProperties: false };
  const carriesResource = bodyFields.some((f) => f.message?.typeName.startsWith("platform."));
  if (carriesResource) body.required = bodyFields.filter((f) => f.message?.typeName.startsWith("platform.")).map((f) => f.jsonName);
  const hasBody = bodyFields.length > 0;
  const bypass = rule.access === Access.TENANT_OR_PLATFORM_ADMIN ? " A `platform:admin` caller may call it on any tenant." : "";
  const role = rule.write && !tenantless ? " Needs the admin role in the tenant." : "";
  return {
    operationId: method.name,
    summary: words(method.name),
    description: joinText(describe(method), `\`platform.v1.PlatformService/${method.name}\`.${role}${bypass}`),
    tags: [tag],
    // Alternatives: any one of the scopes allows the call.
    security: scopes.map((s) => ({ bearer: [s] })),
    parameters,
    ...(hasBody ? { requestBody: { required: carriesResource, content: { "application/json": { schema: body } } } } : {}),
    responses: {
      [String(route.successStatus)]: { description: words(method.output.name), content: { "application/json": { schema: ref(method.output.name) } } },
      ...errorResponses(route, route.verb === "POST" || route.verb === "PATCH"),
    },
    "x-scopes": scopes,
  };
}

const CONNECT_CODES = ["canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists", "permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range", "unimplemented", "internal", "unavailable", "data_loss", "unauthenticated"];

export function openApiDocument(service: DescService, version: string): OpenApiDocument {
  const routes = deriveRestRoutes(service);
  // A resource's tag: its collection path segment, described by the resource's comment.
  const tagOf = (route: RestRoute) => route.path.split("/")[3]!;
  const tags = new Map<string, string | undefined>();
  for (const route of routes) tags.set(tagOf(route), describe(route.resource ?? route.method));
  const paths: Record<string, Record<string, Operation>> = {};
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    (paths[path] ??= {})[route.verb.toLowerCase()] = operation(route, tagOf(route));
  }
  const { messages, enums } = collectTypes(routes.map((r) => r.method));
  const schemas: Record<string, JsonSchema> = {};
  for (const name of [...messages.keys()].sort()) schemas[name] = messageComponent(messages.get(name)!);
  for (const name of [...enums.keys()].sort()) schemas[name] = enumComponent(enums.get(name)!);
  schemas[ERROR] = {
    type: "object",
    description: "The Connect error JSON every REST error answers with, with the HTTP status Connect maps its code to.",
    properties: {
      code: { type: "string", enum: CONNECT_CODES },
      message: { type: "string", description: "What went wrong; an `invalid_argument` message starts with the field it names (`agent.name: is required`)." },
      details: { type: "array", items: { type: "object" } },
    },
    required: ["code"],
  };
  return {
    openapi: "3.1.0",
    info: {
      title: "agentplane REST API",
      version,
      description: joinText(
        "The REST mirror of `platform.v1.PlatformService`: each route calls the same implementation as Connect. Bodies and responses are the proto3 JSON of the request and response messages (lowerCamelCase names; the path gives `id`, query parameters give the other fields of reads, deletes and update masks).",
        describe(service),
      ),
    },
    tags: [...tags].map(([name, description]) => ({ name, ...(description ? { description } : {}) })),
    paths,
    components: {
      schemas,
      parameters: {
        Tenant: {
          name: "X-Platform-Tenant",
          in: "header",
          required: true,
          description: "Slug of the tenant the call acts on; the caller must be a member (or hold `platform:admin` where the operation allows it).",
          schema: { type: "string", pattern: SLUG.source },
        },
      },
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "An OAuth 2.0 access token for the API's audience (a JWT checked against the issuer's keys, or an opaque token checked by introspection). Reads need `platform:read` or `platform:write`, writes `platform:write`, platform operations `platform:admin`.",
        },
      },
    },
  };
}
