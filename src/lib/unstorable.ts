// Characters PostgreSQL cannot store and SQLite can: NUL (refused in text and
// jsonb) and a UTF-16 surrogate without its other half (refused in jsonb).
// Matched as code units (no `u` flag). Both engines treat them alike by
// refusing them at the door (service/validate.ts) or escaping them in what a
// run records (runtime/recordable.ts).
export const UNSTORABLE = /\0|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, "g");

// NUL or any surrogate: a quick test that rules out most strings (pairs, rare, then get the exact one).
const SUSPECT = /[\0\ud800-\udfff]/;

export const hasUnstorable = (s: string): boolean => SUSPECT.test(s) && UNSTORABLE.test(s);

// `s` with each such character replaced: a function gets the character.
export const replaceUnstorable = (s: string, by: string | ((c: string) => string)): string =>
  hasUnstorable(s) ? s.replace(UNSTORABLE_ALL, by as (c: string) => string) : s;

// A message (an error text) as the store will take it: such characters as U+FFFD.
export const storableMessage = (s: string): string => replaceUnstorable(s, "\ufffd");
