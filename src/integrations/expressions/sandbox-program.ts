import { createRequire } from "node:module";
import type jsonataType from "jsonata";
import { linearRegExpClass } from "./linear-regex.js";
import { GUARDED_NATIVES, installSizeLimits, loadNatives, type NativeFunction } from "./size-guard.js";

// A filter's answer is a boolean; a value (step arguments) and a mapping (a
// webhook source's) are plain JSON.
export type Mode = "filter" | "value" | "mapping";

// What a sandbox process is asked: one expression of a job (an event and its
// candidate filters, or one step's arguments) on the job's input.
export interface SandboxTask {
  id: number;
  index: number;
  mode: Mode;
  expression: string;
  input: unknown;
  budgetMs: number;
}

// Why an expression produced no value: `timeout` (its budget, CPU time in a
// sandbox process, wall time in the inline slice),
// `depth` (nesting or recursion), `memory` (the process's heap, or its death
// past one of V8's size limits), `limit` (a sequence, string or result past
// the size limits, see size-guard.ts), `error` (anything the expression itself got wrong),
// `skipped` (its caller no longer wanted it when its turn came), `overloaded`
// (its process got too little of a core to spend its budget before the wall
// ceiling: the machine's load, not the expression, as far as the service can
// tell; the caller may try again).
export type OverrunKind = "timeout" | "depth" | "memory" | "limit";
export type Outcome = { ok: true; value: unknown } | { ok: false; kind: OverrunKind | "error" | "skipped" | "overloaded"; message: string };

export interface SandboxAnswer {
  id: number;
  index: number;
  outcome: Outcome;
}

export interface SandboxProgramData {
  maxDepth: number;
  maxSequence: number;
  maxChars: number;
}

// The sandbox process's side of its IPC channel.
export interface SandboxChannel {
  onTask(handle: (task: SandboxTask) => void): void;
  answer(answer: SandboxAnswer): void;
}

// What an evaluation produced, as it leaves the evaluator: only plain JSON
// (no functions, no sequences' extra properties); a filter's answer is true
// only for a boolean true. Self-contained: the sandbox gets it as source text.
export function settle(value: unknown, mode: Mode): Outcome {
  if (mode === "filter") return { ok: true, value: value === true };
  // Functions and JSONata lambdas (which carry their environment) are dropped.
  const plain = (_key: string, v: unknown) => (typeof v === "function" || (v as { _jsonata_lambda?: boolean } | null)?._jsonata_lambda ? undefined : v);
  return { ok: true, value: value === undefined ? undefined : JSON.parse(JSON.stringify(value, plain)) };
}

// JSONata's guardrail errors as overrun kinds. Self-contained, as above.
export function classifyFailure(err: unknown): Outcome {
  const e = err as { code?: string; message?: string } | undefined;
  const message = String(e?.message ?? err).slice(0, 300);
  if (e?.code === "D1012") return { ok: false, kind: "timeout", message };
  // V8's own ceilings on one string or array, reached in one step: the same
  // failure as the size limits, had they been set higher.
  const v8Size = err instanceof RangeError && /Invalid (string|array|typed array) length|Array buffer allocation/.test(message);
  if (e?.code === "D2014" || e?.code === "D2015" || e?.code === "expression_limit" || v8Size) return { ok: false, kind: "limit", message };
  if (e?.code === "D1011" || err instanceof RangeError) return { ok: false, kind: "depth", message };
  return { ok: false, kind: "error", message };
}

export interface Evaluation {
  jsonata: typeof jsonataType;
  RegexEngine: new (literal: RegExp) => unknown;
  settle: typeof settle;
  classifyFailure: typeof classifyFailure;
  natives: Record<string, NativeFunction>;
  installSizeLimits: typeof installSizeLimits;
}

// Runs in the sandbox process. It is shipped as source text (below), so it
// closes over nothing: everything it uses arrives as a parameter.
export function serveExpressions(channel: SandboxChannel, data: SandboxProgramData, { jsonata, RegexEngine, settle, classifyFailure, natives, installSizeLimits }: Evaluation): void {
  type Compiled = { expression: ReturnType<typeof jsonataType>; options: { timeout: number }; checkResult: (value: unknown) => void };
  const compiled = new Map<string, Compiled>();
  const compile = (source: string): Compiled => {
    let entry = compiled.get(source);
    if (!entry) {
      const options = { timeout: 0, stack: data.maxDepth, sequence: data.maxSequence, RegexEngine };
      const expression = jsonata(source, options as Parameters<typeof jsonataType>[1]); // the options typings predate timeout/stack/sequence
      const checkResult = installSizeLimits(expression, natives, { maxChars: data.maxChars, maxItems: data.maxSequence });
      entry = { expression, options, checkResult };
      if (compiled.size >= 1000) compiled.clear();
      compiled.set(source, entry);
    }
    return entry;
  };
  channel.onTask(async (task) => {
    let outcome: Outcome;
    try {
      const { expression, options, checkResult } = compile(task.expression);
      options.timeout = task.budgetMs;
      const value = await expression.evaluate(task.input);
      if (task.mode !== "filter") checkResult(value);
      outcome = settle(value, task.mode);
    } catch (err) {
      outcome = classifyFailure(err);
    }
    channel.answer({ id: task.id, index: task.index, outcome });
  });
}

// The sandbox process's program: the functions above as source text, with
// jsonata and re2js loaded by the paths this process resolved. Source text
// rather than a module path, so the same code runs compiled (dist/) and from
// TypeScript under the test runner. Both compilers target ES2022, so the
// text needs no helpers of theirs.
export function sandboxProgram(data: SandboxProgramData): string {
  const require = createRequire(import.meta.url);
  // `__name`: esbuild-based runners (tsx) wrap functions in it to keep names.
  return `
    var __name = (fn) => fn;
    const jsonata = require(${JSON.stringify(require.resolve("jsonata"))});
    const { RE2JS } = require(${JSON.stringify(require.resolve("re2js"))});
    const linearRegExpClass = ${linearRegExpClass.toString()};
    const settle = ${settle.toString()};
    const classifyFailure = ${classifyFailure.toString()};
    const installSizeLimits = ${installSizeLimits.toString()};
    const loadNatives = ${loadNatives.toString()};
    // jsonata's timeout reads Date.now. This process runs nothing but
    // expressions, so its Date.now is the CPU time the process used: a
    // budget counts computing, not waiting for a core on a loaded machine.
    Date.now = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
    // Orphaned (the service died): stop too.
    process.on("disconnect", () => process.exit(0));
    const channel = { onTask: (handle) => process.on("message", handle), answer: (a) => process.send(a) };
    loadNatives(jsonata, ${JSON.stringify(GUARDED_NATIVES)}).then((natives) => {
      const evaluation = { jsonata, RegexEngine: linearRegExpClass(RE2JS), settle, classifyFailure, natives, installSizeLimits };
      (${serveExpressions.toString()})(channel, ${JSON.stringify(data)}, evaluation);
      process.send({ ready: true });
    });
  `;
}
