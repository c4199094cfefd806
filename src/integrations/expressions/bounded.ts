// Expressions whose cost is at most linear in their input, so they may run on
// the service's own event loop under a short time slice instead of paying a
// round trip to the sandbox: navigation, predicates, comparisons, arithmetic,
// string concatenation, conditionals, constructors, a list of builtins that
// are linear in their arguments, and short regular expressions (RE2, linear
// in input and pattern; each match's cost is checked as it starts, see
// linear-regex.ts). Anything that can loop, recurse, allocate without bound
// (ranges, lambdas, bindings, sorting, `**`, function application,
// transforms) is not, nor a pattern with counted repetition (`a{1000}`),
// whose compiled size is not its length, nor a case-insensitive range.
//
// Linear in time is not enough on this thread, because one native call is
// never interrupted by the time slice: what a builtin or `&` builds in one
// call is checked against the size limits before or as it returns
// (size-guard.ts), and a path may not reach back to the root (`$$`) from a
// later step or a predicate: each element would then yield the whole input
// by reference in constant time, and JSONata flattens those results in one
// loop the time guard does not interrupt (|a| × |a| items for
// `payload.a.$$.payload.a`).
const NODE_TYPES = new Set(["path", "binary", "unary", "name", "string", "number", "value", "wildcard", "condition", "block", "function", "variable"]);
const UNARY = new Set(["-", "[", "{"]);
// Longest pattern source a bounded expression may hold.
export const INLINE_PATTERN_MAX_CHARS = 256;
// Short, with no counted repetition, and no character range folded to other
// cases (`/[A-𞥂]/i` compiles every code point of the range: 15 ms): the
// compiled program is then about as long as the pattern, and quick to make.
const inlinePattern = (value: unknown) => {
  if (!(value instanceof RegExp) || value.source.length > INLINE_PATTERN_MAX_CHARS || value.source.includes("{")) return false;
  const folds = value.flags.includes("i") || value.source.includes("(?");
  return !(folds && /\[[^\]]*-/.test(value.source));
};
export const BOUNDED_FUNCTIONS = [
  "exists", "not", "boolean", "number", "string", "length", "lowercase", "uppercase", "trim", "contains",
  "substring", "substringBefore", "substringAfter", "count", "sum", "max", "min", "average", "type",
  "abs", "floor", "ceil", "round", "lookup", "keys", "join",
] as const;
const FUNCTIONS = new Set<string>(BOUNDED_FUNCTIONS);
// Properties the parser adds for grouping, sorting, focus and index binding.
const UNBOUNDED_PROPERTIES = ["group", "focus", "index", "tuple"];

export function isBounded(ast: unknown): boolean {
  // Each node with whether it is evaluated once per element of something
  // (a path's later step, a predicate), where the root may not be reached.
  const stack: [unknown, boolean][] = [[ast, false]];
  while (stack.length) {
    const [node, perElement] = stack.pop()!;
    if (Array.isArray(node)) {
      for (const child of node) stack.push([child, perElement]);
      continue;
    }
    if (!node || typeof node !== "object") continue;
    const n = node as { type?: string; value?: unknown; procedure?: { type?: string; value?: unknown }; steps?: unknown[] };
    if (n.type === "filter") {
      stack.push([(node as { expr?: unknown }).expr, true]);
      continue;
    }
    if (n.type === "regex") {
      if (!inlinePattern(n.value)) return false;
      continue;
    }
    if (!n.type || !NODE_TYPES.has(n.type)) return false;
    if (UNBOUNDED_PROPERTIES.some((p) => p in node)) return false;
    if (n.type === "binary" && n.value === "..") return false;
    if (n.type === "unary" && !UNARY.has(n.value as string)) return false;
    if (n.type === "variable" && n.value !== "" && n.value !== "$") return false;
    if (n.type === "variable" && n.value === "$" && perElement) return false;
    if (n.type === "function" && (n.procedure?.type !== "variable" || !FUNCTIONS.has(n.procedure.value as string))) return false;
    for (const [key, child] of Object.entries(node)) {
      if (key === "procedure" || key === "position" || !child || typeof child !== "object") continue;
      if (key === "steps" && n.type === "path") n.steps!.forEach((step, i) => stack.push([step, perElement || i > 0]));
      else stack.push([child, perElement || key === "predicate" || key === "stages"]);
    }
  }
  return true;
}
