import type jsonataType from "jsonata";

// Bounds on what one evaluation may build, in every tier (inline and sandbox).
export interface SizeLimits {
  // Longest string an evaluation may build, and largest JSON text it may
  // produce or serialise (`$string`, `&` of an object, its result).
  maxChars: number;
  // Longest array a builtin may return.
  maxItems: number;
}

// A JSONata builtin as its library defines it (what evaluating `$join` yields).
export interface NativeFunction {
  _jsonata_function: true;
  implementation: (...args: unknown[]) => unknown;
  signature?: unknown;
}

// The builtins whose results may be large: each is wrapped so its result is
// checked, and the ones that can build far more than they were given in one
// native call (no time slice can interrupt it) are checked before they run.
export const GUARDED_NATIVES = [
  "string", "substring", "substringBefore", "substringAfter", "lowercase", "uppercase", "length", "trim", "pad",
  "match", "replace", "split", "join", "formatNumber", "formatBase", "formatInteger", "base64encode", "base64decode",
  "encodeUrlComponent", "encodeUrl", "decodeUrlComponent", "decodeUrl", "map", "zip", "filter", "reduce", "sift",
  "keys", "lookup", "append", "spread", "merge", "reverse", "each", "sort", "shuffle", "distinct", "clone",
] as const;

// The builtins' library definitions, read once from a JSONata instance
// (`names`: GUARDED_NATIVES; a parameter, as the sandbox gets this as text).
export async function loadNatives(jsonata: typeof jsonataType, names: readonly string[]): Promise<Record<string, NativeFunction>> {
  // One evaluation for all: a sandbox process does this as it starts.
  const found = (await jsonata(`[${names.map((name) => `$${name}`).join(", ")}]`).evaluate(null)) as NativeFunction[];
  return Object.fromEntries(names.map((name, i) => [name, found[i]!]));
}

// Installs the size limits on a compiled expression: its builtins are
// replaced by checked ones (bindings in the expression's own environment,
// which shadow the library's), and its string concatenations (`&`, which the
// evaluator does natively, stringifying non-strings) become calls of a
// checked concatenation. Returns the check for its result.
//
// Why checks rather than counting every value: JSONata's evaluator is the
// only place values are made, and it offers no hook short of one per node;
// what can amplify in one step is a builtin or `&`, and everything else
// (paths, constructors) is a loop of evaluator steps that the time guard
// interrupts. Self-contained: the sandbox process gets it as source text.
export function installSizeLimits(
  expression: ReturnType<typeof jsonataType>,
  natives: Record<string, NativeFunction>,
  limits: SizeLimits,
): (value: unknown) => void {
  const { maxChars, maxItems } = limits;
  const fail = (what: string): never => {
    // An object, as JSONata's own errors are, with a code the classifier knows.
    throw { code: "expression_limit", message: `${what} (the limit is ${maxChars} characters and ${maxItems} array items)` };
  };
  const isFn = (v: unknown) => typeof v === "function" || (v !== null && typeof v === "object" && ((v as { _jsonata_function?: boolean })._jsonata_function || (v as { _jsonata_lambda?: boolean })._jsonata_lambda));

  // The length of `value` as JSON text, counted without building it and
  // given up once past `limit` (so cyclic or shared structures cost at most
  // `limit` steps). Strings count as written (`.length` does not flatten a
  // concatenation); `indent`: `$string(v, true)`'s two spaces per level.
  const jsonLength = (value: unknown, limit: number, indent: boolean): number => {
    let total = 0;
    const scalar = (v: unknown) => {
      if (typeof v === "string") return v.length + 2;
      if (typeof v === "number") return String(v).length;
      if (v === null || v === undefined || typeof v === "boolean" || isFn(v)) return 5;
      total += 2; // braces; the value's insides are counted when it is taken off the stack
      return -1;
    };
    const values: unknown[] = [];
    const depths: number[] = [];
    const visit = (v: unknown, depth: number) => {
      const n = scalar(v);
      if (n >= 0) total += n;
      else {
        values.push(v);
        depths.push(depth);
      }
    };
    visit(value, 0);
    while (values.length && total <= limit) {
      const v = values.pop() as object;
      const depth = depths.pop()! + 1;
      const separator = 1 + (indent ? 2 * depth + 1 : 0);
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length && total <= limit; i++) {
          total += separator;
          visit(v[i], depth);
        }
      } else {
        for (const key in v) {
          if (total > limit) break;
          total += separator + key.length + 3;
          visit((v as Record<string, unknown>)[key], depth);
        }
      }
    }
    return total;
  };
  const checkText = (what: string, value: unknown, indent = false) => {
    if (typeof value === "string") {
      if (value.length > maxChars) fail(`${what} would be ${value.length} characters`);
    } else if (value !== undefined && !isFn(value) && jsonLength(value, maxChars, indent) > maxChars) fail(`${what} would pass ${maxChars} characters`);
  };
  const checkResult = (name: string, value: unknown): unknown => {
    if (typeof value === "string" && value.length > maxChars) fail(`$${name} built ${value.length} characters`);
    if (Array.isArray(value) && value.length > maxItems) fail(`$${name} built ${value.length} array items`);
    return value;
  };
  const stringOf = natives.string!.implementation;

  // What each amplifying builtin would build, checked before it runs.
  const before: Record<string, (args: unknown[]) => unknown[]> = {
    // |array| × |separator|, the first amplifier found.
    join: ([strings, separator]) => {
      const list = Array.isArray(strings) ? strings : [strings];
      // The separators alone may pass the limit; the strings are summed only
      // while under it, so a refusal costs no walk of a long list.
      const separators = typeof separator === "string" ? separator.length * Math.max(0, list.length - 1) : 0;
      if (separators > maxChars) fail(`$join would build ${separators} characters of separators alone`);
      let chars = separators;
      let i = 0;
      for (; i < list.length && chars <= maxChars; i++) if (typeof list[i] === "string") chars += (list[i] as string).length;
      if (chars > maxChars) fail(`$join would build ${i < list.length ? "more than " : ""}${chars} characters`);
      return [strings, separator];
    },
    string: ([value, pretty]) => {
      checkText("$string", value, pretty === true);
      return [value, pretty];
    },
    pad: ([str, width, char]) => {
      const chars = Math.abs(Math.trunc(Number(width) || 0)) * Math.max(1, typeof char === "string" ? char.length : 1);
      if (chars > maxChars) fail(`$pad would build ${chars} characters`);
      return [str, width, char];
    },
    // Keys are merged into one set: the same object listed many times (a
    // path that repeats the root) adds nothing but costs each time.
    keys: ([value]) => [Array.isArray(value) ? Object.assign([...new Set(value)], { sequence: true }) : value],
  };
  for (const name of Object.keys(natives)) {
    const native = natives[name]!;
    const check = before[name];
    const implementation = function (this: unknown, ...args: unknown[]) {
      const result = native.implementation.apply(this, check ? check(args) : args);
      return result instanceof Promise ? result.then((r) => checkResult(name, r)) : checkResult(name, result);
    };
    // JSONata passes a function given to a higher-order builtin as many
    // arguments as its implementation declares (`$map(xs, $string)`).
    Object.defineProperty(implementation, "length", { value: native.implementation.length });
    expression.assign(name, { ...native, implementation });
  }

  // `a & b`, as the evaluator does it (undefined is empty, other values are
  // their `$string`), with both sides and the result within the limit.
  const concat = (left: unknown, right: unknown) => {
    const text = (v: unknown) => {
      if (v === undefined || typeof v === "string") return v ?? "";
      if (typeof v === "function") return "";
      checkText("a concatenated value", v);
      return stringOf(v) as string;
    };
    const l = text(left);
    const r = text(right);
    if (l.length + r.length > maxChars) fail(`a concatenation would build ${l.length + r.length} characters`);
    return l.concat(r);
  };
  const concatFunction = { _jsonata_function: true, implementation: concat };
  const seen = new Set<unknown>();
  const stack: unknown[] = [expression.ast()];
  while (stack.length) {
    const node = stack.pop();
    if (!node || typeof node !== "object" || seen.has(node)) continue;
    seen.add(node);
    const n = node as Record<string, unknown>;
    if (n.type === "binary" && n.value === "&") {
      // The procedure is a literal holding the function, not a name a tenant
      // could rebind.
      Object.assign(n, { type: "function", value: "(", procedure: { type: "value", value: concatFunction, position: n.position }, arguments: [n.lhs, n.rhs] });
      delete n.lhs;
      delete n.rhs;
    }
    for (const child of Object.values(n)) if (child && typeof child === "object" && !(child instanceof RegExp)) stack.push(child);
  }

  return (value: unknown) => checkText("the result", value);
}
