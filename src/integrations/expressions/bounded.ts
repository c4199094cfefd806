// Expressions whose cost is at most linear in their input, so they may run on
// the service's own event loop under a short time slice instead of paying a
// round trip to the sandbox: navigation, predicates, comparisons, arithmetic,
// string concatenation, conditionals, constructors, and a list of builtins
// that are linear in their arguments. Anything that can loop, recurse,
// allocate without bound or backtrack (ranges, lambdas, bindings, regular
// expressions, sorting, `**`, function application, transforms) is not.
const NODE_TYPES = new Set(["path", "binary", "unary", "name", "string", "number", "value", "wildcard", "condition", "block", "function", "variable"]);
const UNARY = new Set(["-", "[", "{"]);
const FUNCTIONS = new Set([
  "exists", "not", "boolean", "number", "string", "length", "lowercase", "uppercase", "trim", "contains",
  "substring", "substringBefore", "substringAfter", "count", "sum", "max", "min", "average", "type",
  "abs", "floor", "ceil", "round", "lookup", "keys", "join",
]);
// Properties the parser adds for grouping, sorting, focus and index binding.
const UNBOUNDED_PROPERTIES = ["group", "focus", "index", "tuple"];

export function isBounded(ast: unknown): boolean {
  const stack: unknown[] = [ast];
  while (stack.length) {
    const node = stack.pop();
    if (Array.isArray(node)) {
      stack.push(...node);
      continue;
    }
    if (!node || typeof node !== "object") continue;
    const n = node as { type?: string; value?: unknown; procedure?: { type?: string; value?: unknown } };
    if (n.type === "filter") {
      stack.push((node as { expr?: unknown }).expr);
      continue;
    }
    if (!n.type || !NODE_TYPES.has(n.type)) return false;
    if (UNBOUNDED_PROPERTIES.some((p) => p in node)) return false;
    if (n.type === "binary" && n.value === "..") return false;
    if (n.type === "unary" && !UNARY.has(n.value as string)) return false;
    if (n.type === "variable" && n.value !== "" && n.value !== "$") return false;
    if (n.type === "function" && (n.procedure?.type !== "variable" || !FUNCTIONS.has(n.procedure.value as string))) return false;
    for (const [key, child] of Object.entries(node)) if (key !== "procedure" && key !== "position" && child && typeof child === "object") stack.push(child);
  }
  return true;
}
