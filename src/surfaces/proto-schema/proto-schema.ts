// JSON Schemas of the proto3 JSON forms of messages, read from the
// descriptors: shared by the MCP tool schemas and the REST mirror's OpenAPI
// document, with the proto comments as descriptions.
import { getOption, ScalarType, type DescEnum, type DescEnumValue, type DescField, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { comments } from "../../../gen/platform/v1/comments.js";
import { FieldBehavior, field_behavior } from "../../../gen/platform/v1/options_pb.js";

export interface JsonSchema {
  [key: string]: unknown;
}

type Described = DescMessage | DescEnum | DescService | DescField | DescEnumValue | DescMethod;

function fullName(desc: Described): string {
  switch (desc.kind) {
    case "field":
    case "enum_value":
    case "rpc":
      return `${desc.parent.typeName}.${desc.name}`;
    default:
      return desc.typeName;
  }
}

// The element's proto comment (generated into gen/ by protoc-gen-comments).
export const describe = (desc: Described): string | undefined => comments[fullName(desc)];

// Set by the service; not an input (AIP-203 OUTPUT_ONLY).
export const isOutputOnly = (field: DescField) => getOption(field, field_behavior) === FieldBehavior.OUTPUT_ONLY;
// A secret: accepted, never returned.
export const isInputOnly = (field: DescField) => getOption(field, field_behavior) === FieldBehavior.INPUT_ONLY;

// Proto JSON forms of the well-known types (what fromJson accepts and toJson writes).
const WELL_KNOWN: Record<string, JsonSchema> = {
  "google.protobuf.Timestamp": { type: "string", format: "date-time", description: 'RFC 3339 time, e.g. "2024-05-01T12:00:00Z"' },
  "google.protobuf.Duration": { type: "string", pattern: "^-?[0-9]+(\\.[0-9]+)?s$", description: 'duration in seconds, e.g. "30s" or "3.5s"' },
  "google.protobuf.FieldMask": { type: "string", description: 'comma-separated lowerCamelCase field names, e.g. "name,description"' },
  "google.protobuf.Struct": { type: "object", description: "a JSON object" },
  "google.protobuf.Value": { description: "any JSON value" },
};

function wellKnownSchema(message: DescMessage): JsonSchema | undefined {
  const known = WELL_KNOWN[message.typeName];
  // A message of another package would be written as a plain object, which
  // its proto JSON form may not be: refuse rather than describe it wrongly.
  if (!known && !message.typeName.startsWith("platform.")) throw new Error(`no JSON schema for ${message.typeName}`);
  // A copy: a caller marks its field's schema (readOnly on an output-only
  // `Value`), which must not reach every other field of the type.
  return known && { ...known };
}

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

// Schemas of the named types a field refers to: inlined (MCP) or references
// to components (OpenAPI).
export interface TypeSchemas {
  message(message: DescMessage): JsonSchema;
  enumeration(enumeration: DescEnum): JsonSchema;
}

function valueSchema(kind: "scalar" | "enum" | "message", field: DescField, types: TypeSchemas): JsonSchema {
  if (kind === "enum") return types.enumeration(field.enum!);
  if (kind === "message") return wellKnownSchema(field.message!) ?? types.message(field.message!);
  return scalarSchema(field.scalar!);
}

// One field's value schema (list, map or single), without its description.
export function fieldValueSchema(field: DescField, types: TypeSchemas): JsonSchema {
  switch (field.fieldKind) {
    case "list":
      return { type: "array", items: valueSchema(field.listKind, field, types) };
    case "map":
      return { type: "object", additionalProperties: valueSchema(field.mapKind, field, types) };
    default:
      return valueSchema(field.fieldKind, field, types);
  }
}

// The field's schema with its comment; a well-known type's own description
// follows the field's.
export function fieldSchema(field: DescField, types: TypeSchemas): JsonSchema {
  const schema = fieldValueSchema(field, types);
  const own = describe(field);
  const inner = typeof schema.description === "string" ? schema.description : undefined;
  if (!own) return schema;
  const wellKnown = field.message !== undefined && WELL_KNOWN[field.message.typeName] !== undefined;
  return { ...schema, description: !inner ? own : wellKnown ? `${own} (${inner})` : `${own}\n\n${inner}` };
}

// "Set at most one of" for each oneof, as proto JSON allows.
export function oneofNote(message: DescMessage): string | undefined {
  const oneofs = message.oneofs.map((o) => o.fields.map((f) => f.jsonName).join(" | "));
  return oneofs.length ? `Set at most one of: ${oneofs.join("; ")}.` : undefined;
}

export const joinText = (...parts: (string | undefined)[]) => parts.filter(Boolean).join("\n\n") || undefined;
