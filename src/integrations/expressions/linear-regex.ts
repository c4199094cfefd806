import { RE2JS } from "re2js";

export type LinearEngine = typeof RE2JS;

// JSONata's regex literals (`/^(a+)+$/`) run on RE2 instead of V8's
// backtracking engine: matching is linear in the input, so no payload a
// webhook sender chooses can make a tenant's filter backtrack exponentially.
// RE2 has no backreferences or lookaround; such patterns are refused when saved.
//
// A factory over the engine, because the sandbox process receives this class
// as source text (see sandbox-program.ts): it closes over nothing else.
//
// `inline`: the class for the inline tier, which runs only short patterns
// (bounded.ts) on the service's own thread. One match is a loop its time
// slice cannot interrupt, so a match whose input length times pattern
// length passes `maxCost` (RE2's matching is linear in both; about 50 ns
// per unit at worst on this engine) throws `{ code: TOO_COSTLY }` instead.
// Its compiled patterns are kept, since JSONata compiles a literal each time
// it evaluates one and compiling costs far more than matching a short
// string; short patterns keep that cache small. The other classes (the
// sandbox's, the check at save) compile each time.
export function linearRegExpClass(engine: LinearEngine, inline?: { maxCost: number }) {
  const maxCost = inline?.maxCost ?? Infinity;
  const patterns = new Map<string, RE2JS>();
  const compile = (source: string, flags: string) => {
    const key = `${flags}/${source}`;
    let pattern = inline && patterns.get(key);
    if (!pattern) {
      let bits = 0;
      if (flags.includes("i")) bits |= engine.CASE_INSENSITIVE;
      if (flags.includes("m")) bits |= engine.MULTILINE;
      if (flags.includes("s")) bits |= engine.DOTALL;
      pattern = engine.compile(source, bits);
      if (inline) {
        if (patterns.size >= 1000) patterns.clear();
        patterns.set(key, pattern);
      }
    }
    return pattern;
  };

  // The part of the RegExp interface JSONata's `RegexEngine` option uses:
  // `new Engine(regexLiteral)`, `lastIndex`, and `exec`.
  return class LinearRegExp {
    lastIndex = 0;
    readonly #pattern: RE2JS;
    readonly #size: number;

    constructor(literal: RegExp) {
      this.#pattern = compile(literal.source, literal.flags);
      this.#size = literal.source.length;
    }

    exec(input: string): RegExpExecArray | null {
      if (this.lastIndex > input.length) return null;
      if ((input.length - this.lastIndex) * this.#size > maxCost)
        throw { code: "too_costly", message: `matching ${input.length} characters against this pattern is too long to run here` };
      const m = this.#pattern.matcher(input);
      if (!m.find(this.lastIndex)) return null;
      const groups: (string | undefined)[] = [m.group(0) ?? ""];
      for (let g = 1; g <= m.groupCount(); g++) groups.push(m.group(g) ?? undefined);
      this.lastIndex = m.end();
      return Object.assign(groups, { index: m.start(), input }) as unknown as RegExpExecArray;
    }
  };
}

export const LinearRegExp = linearRegExpClass(RE2JS);
// What `exec` throws past its cost (a plain value: the class is shipped as text).
export const TOO_COSTLY = "too_costly";
