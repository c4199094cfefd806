import { toJson, type DescMessage, type JsonObject, type JsonValue, type Message } from "@bufbuild/protobuf";

// REST answers carry every list and map field, empty ones as `[]` and `{}`:
// a curl user or a script indexing `.agents[0]` should not meet an absent
// field. Other zero values stay omitted, as proto JSON does (Connect's own
// answers stay proto JSON as it is: its clients decode by the schema).
export function restJson(schema: DescMessage, message: Message): JsonValue {
  const json = toJson(schema, message);
  fillRepeated(schema, json);
  return json;
}

function fillRepeated(schema: DescMessage, json: JsonValue): void {
  // Well-known types have JSON forms of their own (Struct, Timestamp, …).
  if (schema.typeName.startsWith("google.protobuf.") || !json || typeof json !== "object" || Array.isArray(json)) return;
  const obj = json as JsonObject;
  for (const field of schema.fields) {
    const value = obj[field.jsonName];
    if (field.fieldKind === "list") {
      if (value === undefined) obj[field.jsonName] = [];
      else if (field.listKind === "message") for (const item of value as JsonValue[]) fillRepeated(field.message, item);
    } else if (field.fieldKind === "map") {
      if (value === undefined) obj[field.jsonName] = {};
      else if (field.mapKind === "message") for (const item of Object.values(value as JsonObject)) fillRepeated(field.message, item);
    } else if (field.fieldKind === "message" && value !== undefined) fillRepeated(field.message, value);
  }
}
