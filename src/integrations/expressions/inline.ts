import jsonata from "jsonata";
import { RE2JS } from "re2js";
import { isBounded } from "./bounded.js";
import { linearRegExpClass, TOO_COSTLY } from "./linear-regex.js";
import { classifyFailure, settle, type Mode, type Outcome } from "./sandbox-program.js";
import { GUARDED_NATIVES, installSizeLimits, loadNatives, type NativeFunction, type SizeLimits } from "./size-guard.js";

// At most about 5 ms a match (linear-regex.ts), the inline slice's length:
// a longer input is matched in the sandbox, as a slice that ran out is.
const InlineRegExp = linearRegExpClass(RE2JS, { maxCost: 100_000 });

type Compiled = { expression: ReturnType<typeof jsonata>; options: { timeout: number }; checkResult?: (value: unknown) => void };

// Bounded expressions (see bounded.ts) evaluated on this thread, under a time
// slice short enough that a slow one costs no more than parsing its event
// did, and under the size limits (size-guard.ts), which the slice cannot
// enforce: one builtin call is never interrupted, and one that builds past
// V8's limits ends the process. An evaluation that does not finish within
// the slice is handed to the sandbox with its full budget. The expression is
// not banished for it: a slice also runs out under a garbage collection, and
// a tenant whose expressions keep overrunning soon spends its share of
// inline time.
export class InlineExpressions {
  // null: not bounded.
  readonly #compiled = new Map<string, Compiled | null>();
  readonly #limits: SizeLimits;
  readonly #natives: Promise<Record<string, NativeFunction>>;

  constructor(limits: SizeLimits) {
    this.#limits = limits;
    this.#natives = loadNatives(jsonata, GUARDED_NATIVES);
  }

  // The compiled expression when it may run here.
  accepts(source: string): Compiled | undefined {
    let entry = this.#compiled.get(source);
    if (entry === undefined) {
      entry = null;
      try {
        // Only the time guard: a bounded expression cannot recurse or loop,
        // its regular expressions are short and checked match by match, and
        // its sequences are no larger than its input. JSONata's depth and
        // sequence guards cost a quarter of the webhook path's throughput
        // (bench/webhooks); the time guard costs nothing measurable.
        const options = { timeout: 0, RegexEngine: InlineRegExp };
        const expression = jsonata(source, options as unknown as Parameters<typeof jsonata>[1]); // its typings predate timeout and want a RegExp constructor
        if (isBounded(expression.ast())) entry = { expression, options };
      } catch {
        // A parse error is the sandbox's to report, like any other.
      }
      if (this.#compiled.size >= 10_000) this.#compiled.clear();
      this.#compiled.set(source, entry);
    }
    return entry ?? undefined;
  }

  // Undefined when the slice ran out or a match would take longer than one:
  // evaluate it in the sandbox instead.
  async evaluate(compiled: Compiled, input: unknown, sliceMs: number, mode: Mode): Promise<Outcome | undefined> {
    // Installed before the first evaluation (it rewrites the expression).
    const natives = await this.#natives;
    compiled.checkResult ??= installSizeLimits(compiled.expression, natives, this.#limits);
    compiled.options.timeout = sliceMs;
    try {
      const value = await compiled.expression.evaluate(input);
      if (mode !== "filter") compiled.checkResult(value);
      return settle(value, mode);
    } catch (err) {
      if ((err as { code?: string } | undefined)?.code === TOO_COSTLY) return undefined;
      const outcome = classifyFailure(err);
      return outcome.ok || outcome.kind !== "timeout" ? outcome : undefined;
    }
  }
}
