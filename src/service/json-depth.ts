// Whether a parsed JSON value nests deeper than `max` levels (a scalar is
// level 0, `{}` level 1). Iterative: a value that would overflow a recursive
// walk is measured without one. Stops at the first container past the limit.
export function nestsDeeperThan(value: unknown, max: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  const nodes: object[] = [value];
  const depths: number[] = [1];
  while (nodes.length) {
    const node = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth > max) return true;
    const children: unknown[] = Array.isArray(node) ? node : Object.values(node);
    for (const child of children)
      if (typeof child === "object" && child !== null) {
        nodes.push(child);
        depths.push(depth + 1);
      }
  }
  return false;
}
