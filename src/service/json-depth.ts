// Whether a parsed JSON value nests deeper than `max` levels (a scalar is
// level 0, `{}` level 1). Runs on every webhook payload on the service
// thread, so it walks without allocating: recursion (its depth bounded by
// `max`, since it stops at the first container past the limit), or, for a
// limit a stack could not hold, an explicit stack.
const RECURSION_LIMIT = 1000;

export function nestsDeeperThan(value: unknown, max: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  return max <= RECURSION_LIMIT ? deeper(value, max) : deeperIterative(value, max);
}

// `remaining`: how many more levels may open, this one included.
function deeper(node: object, remaining: number): boolean {
  if (remaining <= 0) return true;
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) {
      const child: unknown = node[i];
      if (typeof child === "object" && child !== null && deeper(child, remaining - 1)) return true;
    }
    return false;
  }
  for (const key in node) {
    const child = (node as Record<string, unknown>)[key];
    if (typeof child === "object" && child !== null && deeper(child, remaining - 1)) return true;
  }
  return false;
}

function deeperIterative(value: object, max: number): boolean {
  const nodes: object[] = [value];
  const depths: number[] = [1];
  while (nodes.length) {
    const node = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth > max) return true;
    for (const child of Array.isArray(node) ? (node as unknown[]) : Object.values(node))
      if (typeof child === "object" && child !== null) {
        nodes.push(child);
        depths.push(depth + 1);
      }
  }
  return false;
}
