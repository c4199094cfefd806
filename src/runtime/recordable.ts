// What a run records of values it did not choose (tool results, model
// replies, step arguments, its output, error texts), made fit for the store
// before it gets there, the same way on both engines:
//
// - Characters PostgreSQL refuses (NUL anywhere; unpaired UTF-16 surrogates
//   in jsonb) are escaped losslessly: a string holding one is recorded as
//   {"$escaped": text}, where text is the string with each `\` doubled and
//   each such character written `\uXXXX` (lowercase hex); an object key
//   holding one becomes "$escaped:" + text. SQLite would take them, but it
//   records the same marker, so a run reads back alike on either store.
// - A value whose JSON passes its cap is recorded as a truncation marker,
//   {"$truncated": {"bytes": N, "limit": L, "preview": "…"}}: N the size of
//   its JSON in UTF-8 bytes, the preview the start of that JSON.
// - A value JSON cannot write (too deep for the stack, a string past V8's
//   length) is recorded as {"$unrecordable": reason}.
//
// Error texts are messages, not data: an unstorable character becomes U+FFFD
// and a long text is cut with a note of how much was dropped.

import { hasUnstorable, replaceUnstorable, storableMessage } from "../lib/unstorable.js";

export interface RecordLimits {
  // A step's arguments and its result, each: JSON bytes.
  stepArgumentsBytes: number;
  stepResultBytes: number;
  // A run's output: JSON bytes.
  outputBytes: number;
  // A run's whole record: every step (all attempts) and the output. A step
  // that would start past it fails the run with `record_limit`.
  runRecordBytes: number;
  // A step's or a run's error text: characters.
  errorChars: number;
}

// Temporal refuses a payload past 2 MB and Inngest a step output past 4 MB;
// here a run's whole record is one row's value, rewritten as steps end, so
// it gets Temporal's bound, and one step's result a quarter of it.
export const DEFAULT_RECORD_LIMITS: RecordLimits = {
  stepArgumentsBytes: 64 * 1024,
  stepResultBytes: 512 * 1024,
  outputBytes: 512 * 1024,
  runRecordBytes: 2 * 1024 * 1024,
  errorChars: 4096,
};

// The start of a truncated value's JSON kept in its marker.
const PREVIEW_CHARS = 512;

// How JSON.stringify writes them: a value whose JSON has none needs no walk.
// (An escaped backslash before "u0000" matches too: the walk then decides.)
const UNSTORABLE_IN_JSON = /\\u0000|\\ud[89a-f]/;

const hex = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
const escapeText = (s: string) => replaceUnstorable(s.replace(/\\/g, "\\\\"), hex);

function escapeValue(value: unknown): unknown {
  if (typeof value === "string") return hasUnstorable(value) ? { $escaped: escapeText(value) } : value;
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map(escapeValue);
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) out[hasUnstorable(key) ? `$escaped:${escapeText(key)}` : key] = escapeValue(v);
  return out;
}

// The first `n` characters of `s`, not ending inside a surrogate pair.
function head(s: string, n: number): string {
  const cut = s.slice(0, n);
  return /[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut;
}

export interface Recorded {
  value: unknown;
  // Its JSON's size in UTF-8 bytes (0 for undefined).
  bytes: number;
  // A marker stands for the value (truncated or unrecordable).
  marker: boolean;
}

// `value` as the store will take it, within `limit` bytes of JSON.
export function recordable(value: unknown, limit: number): Recorded {
  if (value === undefined) return { value, bytes: 0, marker: false };
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
    if (json !== undefined && UNSTORABLE_IN_JSON.test(json)) {
      value = escapeValue(value);
      json = JSON.stringify(value);
    }
  } catch (err) {
    return sized({ $unrecordable: `the value cannot be written as JSON (${(err as Error).name})` });
  }
  if (json === undefined) return { value: undefined, bytes: 0, marker: false };
  const bytes = Buffer.byteLength(json);
  if (bytes <= limit) return { value, bytes, marker: false };
  return sized({ $truncated: { bytes, limit, preview: head(json, Math.min(PREVIEW_CHARS, limit)) } });
}

const sized = (value: unknown): Recorded => ({ value, bytes: Buffer.byteLength(JSON.stringify(value)), marker: true });

// An error text as the store will take it.
export function recordableError(text: string, maxChars: number): string {
  const clean = storableMessage(text);
  if (clean.length <= maxChars) return clean;
  return `${head(clean, maxChars)}… (${clean.length - maxChars} more characters)`;
}
