import jsonata from "jsonata";
import { LinearRegExp } from "../integrations/expressions/linear-regex.js";
import { invalidArgument } from "./errors.js";
import { MAX_LENGTH } from "./limits.js";
import { checkLength } from "./validate.js";

// Regular expression literals of a parsed expression (JSONata's AST keeps
// them as RegExp values).
function regexLiterals(ast: unknown): RegExp[] {
  const found: RegExp[] = [];
  const seen = new Set<unknown>();
  const stack = [ast];
  while (stack.length) {
    const node = stack.pop();
    if (node instanceof RegExp) found.push(node);
    else if (node && typeof node === "object" && !seen.has(node)) {
      seen.add(node);
      stack.push(...Object.values(node));
    }
  }
  return found;
}

// JSONata expressions are compiled when saved, so a typo is refused at
// create time instead of failing a run later; so is a regular expression the
// linear-time engine cannot run (backreferences, lookaround).
export function checkJsonata(field: string, expression: string, maxLength: number): string {
  checkLength(field, expression, maxLength);
  if (!expression.trim()) return expression;
  let ast: unknown;
  try {
    ast = jsonata(expression).ast();
  } catch (err) {
    const e = err as { message?: string; position?: number };
    throw invalidArgument(field, `invalid JSONata${e.position !== undefined ? ` at ${e.position}` : ""}: ${e.message ?? err}`);
  }
  for (const literal of regexLiterals(ast)) {
    try {
      new LinearRegExp(literal);
    } catch (err) {
      throw invalidArgument(
        field,
        `regular expression /${literal.source}/ is not supported (${(err as Error).message}); ` +
          "expressions use a linear-time engine without backreferences or lookaround",
      );
    }
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
  // A fragment is never sent, yet a client that appends paths to a base URL
  // (`…/v1#` + `/chat/completions`) would send its credentials to `…/v1`.
  if (url.href.includes("#")) throw invalidArgument(field, "must not have a fragment (#)");
  return url;
}
