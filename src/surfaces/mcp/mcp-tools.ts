// MCP tools derived from the PlatformService descriptor: one tool per method,
// its input schema generated from the request message. Nothing is listed by hand.
import type { DescEnum, DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { Access } from "../../../gen/platform/v1/options_pb.js";
import { requiredScopes, ruleOf } from "../../service/access.js";
import { describe, fieldSchema, isOutputOnly, joinText, oneofNote, type JsonSchema, type TypeSchemas } from "../proto-schema/proto-schema.js";
import { deriveRestRoutes } from "../rest/rest-routes.js";

export interface PlatformTool {
  name: string;
  method: DescMethod;
  definition: {
    name: string;
    title: string;
    description: string;
    inputSchema: { type: "object"; properties: Record<string, JsonSchema>; required?: string[]; additionalProperties: false };
    annotations: { title: string; readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: false };
  };
}

const snake = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();
const words = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, "$1 $2");

const enumSchema = (e: DescEnum): JsonSchema => ({ type: "string", enum: e.values.map((v) => v.name), ...(describe(e) ? { description: describe(e) } : {}) });

// The message inlined, without its output-only fields (a tool offers only
// what a request can set) except `keep`: the resource's `id` in a request that
// names the record by it (an Update), as the REST route takes it from the path.
function messageSchema(message: DescMessage, seen: Set<string>, keep?: string): JsonSchema {
  if (seen.has(message.typeName)) return { type: "object" }; // recursive types stop here
  const inner = new Set(seen).add(message.typeName);
  const types: TypeSchemas = { message: (m) => messageSchema(m, inner), enumeration: enumSchema };
  const properties: Record<string, JsonSchema> = {};
  for (const field of message.fields) {
    if (field.name === keep) properties[field.jsonName] = { ...fieldSchema(field, types), description: `The ${message.name} this request changes.` };
    else if (!isOutputOnly(field)) properties[field.jsonName] = fieldSchema(field, types);
  }
  const description = joinText(describe(message), oneofNote(message));
  const required = keep ? { required: [message.fields.find((f) => f.name === keep)!.jsonName] } : {};
  return { type: "object", properties, ...required, additionalProperties: false, ...(description ? { description } : {}) };
}

// The request message's fields as tool arguments.
function inputProperties(method: DescMethod, idField: string[] | undefined): Record<string, JsonSchema> {
  const properties: Record<string, JsonSchema> = {};
  for (const field of method.input.fields) {
    if (isOutputOnly(field)) continue;
    const keep = idField?.[0] === field.name ? idField[1] : undefined;
    const types: TypeSchemas = { message: (m) => messageSchema(m, new Set([method.input.typeName]), keep), enumeration: enumSchema };
    properties[field.jsonName] = fieldSchema(field, types);
  }
  return properties;
}

// Required by the API's own convention: the `id` a method acts on, and the
// resource a Create/Add/Update carries.
function requiredFields(method: DescMethod): string[] {
  const standard = /^(Create|Add|Update)/.test(method.name);
  return method.input.fields
    .filter((f) => f.name === "id" || (standard && f.fieldKind === "message" && f.message.typeName.startsWith("platform.v1.")))
    .map((f) => f.jsonName);
}

export function derivePlatformTools(service: DescService): PlatformTool[] {
  // The field that names the record a method acts on, as the REST path gives it.
  const idFields = new Map(deriveRestRoutes(service).map((r) => [r.method.name, r.idField]));
  // Streaming methods are not tools: a tool call answers once (`get_run` is
  // the way to follow a run there).
  return service.methods.filter((m) => m.methodKind === "unary").map((method) => {
    const rule = ruleOf(method);
    const { write } = rule;
    // Said from the same rule the access check applies.
    const role = !write || rule.access === Access.PLATFORM_ADMIN ? "" : " and the tenant admin role";
    const bypass = rule.access === Access.TENANT_OR_PLATFORM_ADMIN ? ", or platform:admin" : "";
    const caller = rule.access === Access.CALLER ? " Answers about the caller only, across tenants; the tenant selected is ignored." : "";
    const needs = `Needs ${requiredScopes("mcp", rule).join(" or ")}${role}${bypass}.${caller}`;
    const name = snake(method.name);
    const properties = inputProperties(method, idFields.get(method.name));
    const required = requiredFields(method);
    const title = words(method.name);
    return {
      name,
      method,
      definition: {
        name,
        title,
        description: [`${title} (platform.v1.PlatformService/${method.name}).`, describe(method), `${write ? "Changes data." : "Read-only."} ${needs}`]
          .filter(Boolean)
          .join(" "),
        inputSchema: { type: "object", properties, ...(required.length ? { required } : {}), additionalProperties: false },
        annotations: {
          title,
          readOnlyHint: !write,
          destructiveHint: /^(Delete|Remove|Cancel|Rotate)/.test(method.name),
          idempotentHint: !write || /^(Update|Delete|Remove)/.test(method.name),
          openWorldHint: false,
        },
      },
    };
  });
}
