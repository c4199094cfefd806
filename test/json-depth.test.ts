// The payload depth check runs on every webhook: both of its walks (recursive
// under the usual limits, iterative past them) must agree on the boundary.
import { nestsDeeperThan } from "../src/service/json-depth.js";

const nested = (levels: number, kind: "object" | "array" | "mixed"): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = kind === "array" || (kind === "mixed" && i % 2) ? [0, v] : { a: 1, b: v };
  return v;
};

describe("nestsDeeperThan", () => {
  it.each([
    [64, "object"],
    [64, "array"],
    [64, "mixed"],
    [5_000, "mixed"],
  ] as const)("with a limit of %i, %s nesting is measured exactly", (max, kind) => {
    expect(nestsDeeperThan(nested(max, kind), max)).toBe(false);
    expect(nestsDeeperThan(nested(max + 1, kind), max)).toBe(true);
  });

  it("counts scalars as level 0 and empty containers as level 1", () => {
    expect(nestsDeeperThan("x", 0)).toBe(false);
    expect(nestsDeeperThan({}, 0)).toBe(true);
    expect(nestsDeeperThan({}, 1)).toBe(false);
    expect(nestsDeeperThan([[]], 1)).toBe(true);
  });

  it("walks a __proto__ key like any other", () => {
    const v = JSON.parse('{"__proto__": {"x": {"y": {}}}}') as unknown;
    expect(nestsDeeperThan(v, 3)).toBe(true);
    expect(nestsDeeperThan(v, 4)).toBe(false);
  });

  it("finds a deep branch after a wide one", () => {
    const v = { items: Array.from({ length: 20_000 }, (_, i) => ({ i })), deep: nested(70, "object") };
    expect(nestsDeeperThan(v, 64)).toBe(true);
    expect(nestsDeeperThan(v, 71)).toBe(false);
  });
});
