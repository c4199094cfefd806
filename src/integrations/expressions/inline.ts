import jsonata from "jsonata";
import { isBounded } from "./bounded.js";
import { LinearRegExp } from "./linear-regex.js";
import { classifyFailure, settle, type Mode, type Outcome } from "./sandbox-program.js";

type Compiled = { expression: ReturnType<typeof jsonata>; options: { timeout: number } };

// Bounded expressions (see bounded.ts) evaluated on this thread, under a time
// slice short enough that a slow one costs no more than parsing its event
// did. One that does not finish within the slice is handed to the sandbox
// with its full budget, and stays there.
export class InlineExpressions {
  // null: not bounded, or sent to the sandbox after overrunning its slice.
  readonly #compiled = new Map<string, Compiled | null>();

  constructor(
    private readonly maxDepth: number,
    private readonly maxSequence: number,
  ) {}

  // The compiled expression when it may run here.
  accepts(source: string): Compiled | undefined {
    let entry = this.#compiled.get(source);
    if (entry === undefined) {
      entry = null;
      try {
        const options = { timeout: 0, stack: this.maxDepth, sequence: this.maxSequence, RegexEngine: LinearRegExp };
        const expression = jsonata(source, options as unknown as Parameters<typeof jsonata>[1]); // its typings predate timeout/stack/sequence and want a full RegExpConstructor
        if (isBounded(expression.ast())) entry = { expression, options };
      } catch {
        // A parse error is the sandbox's to report, like any other.
      }
      if (this.#compiled.size >= 10_000) this.#compiled.clear();
      this.#compiled.set(source, entry);
    }
    return entry ?? undefined;
  }

  // Undefined when the slice ran out: evaluate it in the sandbox instead.
  async evaluate(source: string, compiled: Compiled, input: unknown, sliceMs: number, mode: Mode): Promise<Outcome | undefined> {
    compiled.options.timeout = sliceMs;
    try {
      return settle(await compiled.expression.evaluate(input), mode);
    } catch (err) {
      const outcome = classifyFailure(err);
      if (outcome.ok || outcome.kind !== "timeout") return outcome;
      this.#compiled.set(source, null);
      return undefined;
    }
  }
}
