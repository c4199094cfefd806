import { invalidArgument } from "./errors.js";

const SLUG = /^[a-z][a-z0-9-]{1,62}$/;

export const isSlug = (s: string) => SLUG.test(s);

export function requireText(field: string, value: string, max = 200): string {
  const v = value.trim();
  if (!v) throw invalidArgument(field, "is required");
  if (v.length > max) throw invalidArgument(field, `must be at most ${max} characters`);
  return v;
}

export function optionalText(field: string, value: string, max: number): string {
  if (value.length > max) throw invalidArgument(field, `must be at most ${max} characters`);
  return value;
}

export function requireId(field: string, value: string, kind: string): string {
  if (!value) throw invalidArgument(field, "is required");
  if (!value.startsWith(`${kind}_`)) throw invalidArgument(field, `"${value}" is not a ${kind}_ id`);
  return value;
}
