// MCP tools derived from the PlatformService descriptor: one tool per method,
// its input schema generated from the request message. Nothing is listed by hand.
import type { DescEnum, DescField, DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import { Access } from "../../gen/platform/v1/options_pb.js";
import { requiredScopes, ruleOf } from "../service/access.js";

export interface JsonSchema {
  [key: string]: unknown;
}

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

// Proto JSON forms of the well-known types (what fromJson accepts).
const WELL_KNOWN: Record<string, JsonSchema> = {
  "google.protobuf.Timestamp": { type: "string", format: "date-time", description: "RFC 3339 time" },
  "google.protobuf.Duration": { type: "string", pattern: "^-?[0-9]+(\\.[0-9]+)?s$", description: 'duration in seconds, e.g. "30s"' },
  "google.protobuf.FieldMask": { type: "string", description: 'comma-separated lowerCamelCase field names, e.g. "name,description"' },
  "google.protobuf.Struct": { type: "object" },
  "google.protobuf.Value": { description: "any JSON value" },
};

function scalarSchema(scalar: ScalarType): JsonSchema {
  switch (scalar) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return { type: "string", pattern: "^-?[0-9]+$" }; // 64-bit integers are strings in proto JSON
    default:
      return { type: "integer" };
  }
}

function messageSchema(message: DescMessage, seen: Set<string>): JsonSchema {
  const known = WELL_KNOWN[message.typeName];
  if (known) return known;
  if (seen.has(message.typeName)) return { type: "object" }; // recursive types stop here
  const inner = new Set(seen).add(message.typeName);
  const properties: Record<string, JsonSchema> = {};
  for (const field of message.fields) properties[field.jsonName] = fieldSchema(field, inner);
  const oneofs = message.oneofs.map((o) => `${o.fields.map((f) => f.jsonName).join(" | ")}`);
  return {
    type: "object",
    properties,
    additionalProperties: false,
    ...(oneofs.length ? { description: `set at most one of: ${oneofs.join("; ")}` } : {}),
  };
}

const enumSchema = (e: DescEnum): JsonSchema => ({ type: "string", enum: e.values.map((v) => v.name) });

// One value of a field: the field itself, a list element or a map value.
function valueSchema(kind: "scalar" | "enum" | "message", field: { scalar?: ScalarType; enum?: DescEnum; message?: DescMessage }, seen: Set<string>): JsonSchema {
  if (kind === "enum") return enumSchema(field.enum!);
  if (kind === "message") return messageSchema(field.message!, seen);
  return scalarSchema(field.scalar!);
}

function fieldSchema(field: DescField, seen: Set<string>): JsonSchema {
  switch (field.fieldKind) {
    case "list":
      return { type: "array", items: valueSchema(field.listKind, field, seen) };
    case "map":
      return { type: "object", additionalProperties: valueSchema(field.mapKind, field, seen) };
    default:
      return valueSchema(field.fieldKind, field, seen);
  }
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
    const schema = messageSchema(method.input, new Set()) as { properties: Record<string, JsonSchema> };
    const required = requiredFields(method);
    const title = words(method.name);
    return {
      name,
      method,
      definition: {
        name,
        title,
        description: `${title} (platform.v1.PlatformService/${method.name}). ${write ? "Changes data." : "Read-only."} ${needs}`,
        inputSchema: { type: "object", properties: schema.properties, ...(required.length ? { required } : {}), additionalProperties: false },
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
