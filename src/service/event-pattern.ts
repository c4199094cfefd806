import { invalidArgument } from "./errors.js";
import { MAX_LENGTH } from "./limits.js";
import { checkLength } from "./validate.js";

// Event type patterns: dotted segments; `*` matches one segment, a final `**`
// matches one or more remaining segments.
const SEGMENT = /^[A-Za-z0-9_-]+$/;

export function checkEventType(field: string, type: string): string {
  if (!type) throw invalidArgument(field, "is required");
  checkLength(field, type, MAX_LENGTH.eventType);
  if (!type.split(".").every((s) => SEGMENT.test(s)))
    throw invalidArgument(field, `"${type}" is not a dotted name (letters, digits, _ and - between dots)`);
  return type;
}

export function checkEventTypePattern(field: string, pattern: string): string {
  if (!pattern) throw invalidArgument(field, "is required");
  checkLength(field, pattern, MAX_LENGTH.eventTypePattern);
  const segments = pattern.split(".");
  segments.forEach((s, i) => {
    if (s === "**" && i !== segments.length - 1) throw invalidArgument(field, "`**` may only be the last segment");
    if (s !== "*" && s !== "**" && !SEGMENT.test(s))
      throw invalidArgument(field, `"${pattern}" has an invalid segment "${s}"`);
  });
  return pattern;
}
