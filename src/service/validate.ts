import { toJson, type DescMethod, type Message } from "@bufbuild/protobuf";
import { hasUnstorable } from "../lib/unstorable.js";
import { invalidArgument } from "./errors.js";
import { MAX_LENGTH } from "./limits.js";

// NUL, or a UTF-16 surrogate without its other half: PostgreSQL stores
// neither and SQLite would; both engines refuse them here, so both keep the
// same values.
const UNSTORABLE_PROBLEM = "must not contain NUL characters or unpaired UTF-16 surrogates";

function checkStorable(field: string, value: string): string {
  if (hasUnstorable(value)) throw invalidArgument(field, UNSTORABLE_PROBLEM);
  return value;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const member = (path: string, key: string) =>
  IDENTIFIER.test(key) ? (path ? `${path}.${key}` : key) : `${path}[${JSON.stringify(key)}]`;

// Whether a JSON value holds such a character in a string or a key: on every
// webhook payload, so it builds no paths (iterative: its depth is whatever
// the sender made it).
function holdsUnstorable(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (hasUnstorable(v)) return true;
    } else if (Array.isArray(v)) {
      for (const item of v) if (typeof item !== "number" && typeof item !== "boolean") stack.push(item);
    } else if (typeof v === "object" && v !== null) {
      for (const key in v) {
        if (hasUnstorable(key)) return true;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return false;
}

// Refuses a JSON value (a webhook payload, a request as proto JSON) holding
// such a character in a string or a key, naming where: `payload.user.name`,
// `payload.tags[2]`.
export function checkStorableJson(field: string, value: unknown): void {
  if (!holdsUnstorable(value)) return;
  const stack: { path: string; value: unknown }[] = [{ path: field, value }];
  while (stack.length) {
    const { path, value: v } = stack.pop()!;
    if (typeof v === "string") checkStorable(path, v);
    else if (Array.isArray(v)) v.forEach((item, i) => stack.push({ path: `${path}[${i}]`, value: item }));
    else if (typeof v === "object" && v !== null)
      for (const [key, item] of Object.entries(v)) {
        if (hasUnstorable(key)) throw invalidArgument(path || "request", `keys ${UNSTORABLE_PROBLEM}`);
        stack.push({ path: member(path, key), value: item });
      }
  }
}

export const SLUG = /^[a-z][a-z0-9-]{1,62}$/;

export const isSlug = (s: string) => SLUG.test(s);

export function checkLength(field: string, value: string, max: number): string {
  if (value.length > max) throw invalidArgument(field, `must be at most ${max} characters`);
  return checkStorable(field, value);
}

export function checkCount<T>(field: string, values: readonly T[], max: number): readonly T[] {
  if (values.length > max) throw invalidArgument(field, `must have at most ${max} entries`);
  return values;
}

// Every string of an API request (names, texts, JSON values such as a run's
// input), checked once before its handler, named as the errors name fields:
// proto field names, `agent.steps[0].tool`, `input.customer.name`.
export function checkStorableRequest(method: DescMethod, request: unknown): void {
  let json: unknown;
  try {
    json = toJson(method.input, request as Message, { useProtoFieldName: true });
  } catch {
    // Not writable as JSON (a NaN in a Value): the handler refuses it as it would.
    return;
  }
  checkStorableJson("", json);
}

export function requireText(field: string, value: string, max: number = MAX_LENGTH.name): string {
  const v = value.trim();
  if (!v) throw invalidArgument(field, "is required");
  return checkLength(field, v, max);
}

export function optionalText(field: string, value: string, max: number): string {
  return checkLength(field, value, max);
}

export function requireId(field: string, value: string, kind: string): string {
  if (!value) throw invalidArgument(field, "is required");
  checkLength(field, value, MAX_LENGTH.id);
  if (!value.startsWith(`${kind}_`)) throw invalidArgument(field, `"${value}" is not a ${kind}_ id`);
  return value;
}
