import { invalidArgument } from "./errors.js";
import { MAX_LENGTH } from "./limits.js";

export const SLUG = /^[a-z][a-z0-9-]{1,62}$/;

export const isSlug = (s: string) => SLUG.test(s);

export function checkLength(field: string, value: string, max: number): string {
  if (value.length > max) throw invalidArgument(field, `must be at most ${max} characters`);
  return value;
}

export function checkCount<T>(field: string, values: readonly T[], max: number): readonly T[] {
  if (values.length > max) throw invalidArgument(field, `must have at most ${max} entries`);
  return values;
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
