import { RE2JS } from "re2js";

export type LinearEngine = typeof RE2JS;

// JSONata's regex literals (`/^(a+)+$/`) run on RE2 instead of V8's
// backtracking engine: matching is linear in the input, so no payload a
// webhook sender chooses can make a tenant's filter backtrack exponentially.
// RE2 has no backreferences or lookaround; such patterns are refused when saved.
//
// A factory over the engine, because the sandbox process receives this class
// as source text (see sandbox-program.ts): it closes over nothing else.
export function linearRegExpClass(engine: LinearEngine) {
  const compile = (source: string, flags: string) => {
    let bits = 0;
    if (flags.includes("i")) bits |= engine.CASE_INSENSITIVE;
    if (flags.includes("m")) bits |= engine.MULTILINE;
    if (flags.includes("s")) bits |= engine.DOTALL;
    return engine.compile(source, bits);
  };

  // The part of the RegExp interface JSONata's `RegexEngine` option uses:
  // `new Engine(regexLiteral)`, `lastIndex`, and `exec`.
  return class LinearRegExp {
    lastIndex = 0;
    readonly #pattern: RE2JS;

    constructor(literal: RegExp) {
      this.#pattern = compile(literal.source, literal.flags);
    }

    exec(input: string): RegExpExecArray | null {
      if (this.lastIndex > input.length) return null;
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
