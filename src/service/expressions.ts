import jsonata from "jsonata";
import { invalidArgument } from "./errors.js";
import { MAX_LENGTH } from "./limits.js";
import { checkLength } from "./validate.js";

// JSONata expressions are compiled when saved, so a typo is refused at
// create time instead of failing a run later.
export function checkJsonata(field: string, expression: string, maxLength: number): string {
  checkLength(field, expression, maxLength);
  if (!expression.trim()) return expression;
  try {
    jsonata(expression);
  } catch (err) {
    const e = err as { message?: string; position?: number };
    throw invalidArgument(field, `invalid JSONata${e.position !== undefined ? ` at ${e.position}` : ""}: ${e.message ?? err}`);
  }
  return expression;
}

export function checkHttpUrl(field: string, value: string): URL {
  checkLength(field, value, MAX_LENGTH.url);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalidArgument(field, `"${value}" is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw invalidArgument(field, "must be an http or https URL");
  if (url.username || url.password) throw invalidArgument(field, "must not carry credentials; use the auth settings");
  return url;
}
