// Expressions that amplify their input (issue 19 item 2): every builtin a
// bounded expression may use inline, and `&`, given a hostile input, either
// answers or fails with `limit`; none builds past the size limits on this
// thread, where one native call that passes V8's limits ends the process.
import { ExpressionSandbox, type Outcome } from "../src/integrations/expressions/sandbox.js";
import { DEFAULT_SANDBOX } from "../src/integrations/expressions/sandbox.js";
import { CONSTANT } from "../bench/lib/amplifying.js";

const MAX = DEFAULT_SANDBOX.maxChars;

// 55 KB as JSON, as the webhook that ended the process: |a| × |s| is 300 M
// characters, past V8's largest array (`$length` copies every character).
const a = Array.from({ length: 20_000 }, () => 0);
const s = "x".repeat(15_000);
// Each `ﬃ` is three characters upper-cased.
const f = "ﬃ".repeat(100);
// One object with many keys, which a path repeats once per element of `a`.
const o = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`k${i}`, i]));
const w = a.map(String);
const HOSTILE = { payload: { a, w, s, f, o, small: a.slice(0, 200) } };

const LIMIT = { ok: false, kind: "limit", message: expect.any(String) };

// For each builtin a bounded expression may call inline (bounded.ts), and
// for `&`, what a hostile use of it answers.
const CASES: [string, string, unknown][] = [
  ["join", "$length($join(payload.w, payload.s)) > 0", LIMIT],
  ["join of mapped strings", "$length($join(payload.a.$string(), payload.s)) > 0", LIMIT],
  ["join of a repeated string", "$length($join(payload.a.$$.payload.s)) > 0", LIMIT],
  ["string", "$string(payload.a.$$.payload.s)", LIMIT],
  ["string (pretty)", "$string(payload.small.$$.payload.o, true)", LIMIT],
  ["& of a string", "$length(payload.s & payload.s)", { ok: true, value: 30_000 }],
  ["& of an array", '$length([payload.a.$$.payload.s] & "")', LIMIT],
  ["& of an object", '$length({"k": payload.a.$$.payload.s} & "")', LIMIT],
  ["length", "$length($join(payload.a.$string(), payload.s))", LIMIT],
  ["uppercase", "$length($uppercase($join(payload.a.$string(), payload.f)))", LIMIT],
  ["lowercase", "$length($lowercase($join(payload.a.$string(), payload.s)))", LIMIT],
  ["trim", "$length($trim($join(payload.a.$string(), payload.s)))", LIMIT],
  ["substring", "$substring($join(payload.a.$string(), payload.s), 0, 3)", LIMIT],
  ["substringBefore", '$substringBefore($join(payload.a.$string(), payload.s), "0")', LIMIT],
  ["substringAfter", '$substringAfter($join(payload.a.$string(), payload.s), "x")', LIMIT],
  ["contains", '$contains($join(payload.a.$string(), payload.s), "y")', LIMIT],
  ["keys (a repeated object)", "$count($keys(payload.a.$$.payload.o))", { ok: true, value: 2_000 }],
  ["lookup", '$count($lookup(payload.a.$$.payload, "s"))', { ok: true, value: 20_000 }],
  ["count", "$count(payload.a.$$.payload.a)", LIMIT],
  ["sum", "$sum(payload.a.$$.payload.a)", LIMIT],
  ["max", "$max(payload.a.$$.payload.a)", LIMIT],
  ["min", "$min(payload.a.$$.payload.a)", LIMIT],
  ["average", "$average(payload.a.$$.payload.a)", LIMIT],
  ["exists", "$exists(payload.a.$$.payload.a)", LIMIT],
  ["boolean", "$boolean(payload.a.$$.payload.a)", LIMIT],
  ["not", "$not(payload.a.$$.payload.a)", LIMIT],
  ["number", "$number($join(payload.a.$string(), payload.s))", LIMIT],
  ["type", "$type($join(payload.a.$string(), payload.s))", LIMIT],
  ["abs", "$abs($count(payload.a.$$.payload.a))", LIMIT],
  ["floor", "$floor($count(payload.a.$$.payload.a))", LIMIT],
  ["ceil", "$ceil($count(payload.a.$$.payload.a))", LIMIT],
  ["round", "$round($count(payload.a.$$.payload.a))", LIMIT],
  ["the result", "payload.a.$$.payload.s", LIMIT],
  ["a 5.4 KB constant", CONSTANT, LIMIT],
];

describe("expression size limits", () => {
  let sandbox: ExpressionSandbox;

  beforeAll(() => {
    // A share of inline time no expression here exhausts, and a slice long
    // enough that a loaded machine does not hand them to the sandbox: each
    // bounded one runs on this thread, as it would for a quiet tenant on an
    // idle machine, where time does not stop it and size must.
    sandbox = new ExpressionSandbox({ workers: 2, inlineMsPerSecond: 1_000_000, inlineSliceMs: 1_000 });
    sandbox.warm();
  });
  afterAll(() => sandbox.close());

  it("lists a case for every builtin a bounded expression may use", async () => {
    const { BOUNDED_FUNCTIONS } = await import("../src/integrations/expressions/bounded.js");
    for (const name of BOUNDED_FUNCTIONS) expect(CASES.some(([, expression]) => expression.includes(`$${name}(`))).toBe(true);
    expect(CONSTANT.length).toBeGreaterThan(5_000);
  });

  it.each(CASES)("%s: a hostile input answers within the limits", async (_name, expression, expected) => {
    const [outcome] = await sandbox.evaluate("t", [expression], HOSTILE, 5_000, "value");
    expect(outcome).toEqual(expected);
    // The process (this one, and the sandbox's) is still there to answer.
    expect(await sandbox.evaluate("t", ["1 + 1"], {}, 1_000, "value")).toEqual([{ ok: true, value: 2 }]);
  });

  it("answers a value just under the limit", async () => {
    const sep = "z".repeat(Math.floor(MAX / a.length) - 2);
    const [outcome] = await sandbox.evaluate("t", ["$length($join(payload.a.$string(), payload.sep))"], { payload: { a, sep } }, 5_000, "value");
    expect(outcome).toEqual({ ok: true, value: a.length + sep.length * (a.length - 1) });
  });

  it("fails a filter that amplifies: it does not match, and counts it as a limit", async () => {
    const overruns: string[] = [];
    const counted = new ExpressionSandbox({ inlineMsPerSecond: 1_000_000, inlineSliceMs: 1_000, onOverrun: (mode, kind) => overruns.push(`${mode}:${kind}`) });
    try {
      expect(await counted.evaluate("t", ["$length($join(payload.w, payload.s)) > 0"], HOSTILE, 5_000, "filter")).toEqual([LIMIT]);
      expect(overruns).toEqual(["filter:limit"]);
    } finally {
      await counted.close();
    }
  });

  // Expressions the inline tier never runs: the sandbox applies the same
  // limits, and a process that dies past V8's own anyway fails its
  // expression as `memory`, every time, and is replaced.
  it.each<[string, string, string[]]>([
    ["pad", "$length($pad('', 300000000)) > 0", ["limit"]],
    ["a mapped join", '$count([1..100].$join($$.payload.w, $$.payload.s))', ["limit"]],
    ["a reduce doubling a string", '$length($reduce([1..40], function($acc, $v){ $acc & $acc }, "xy"))', ["limit"]],
    ["replace", '$length($replace($join(payload.w, "x"), "x", payload.s))', ["limit"]],
    ["split", '$count($split($join(payload.a.$string(), payload.sep), ""))', ["limit"]],
    ["eval of a concatenation", '$eval("$length([payload.a.$$.payload.s] & \\"\\")")', ["memory", "limit"]],
  ])("sandbox: %s fails with a limit", async (_name, expression, kinds) => {
    const input = { payload: { ...HOSTILE.payload, sep: "q".repeat(100) } };
    for (let attempt = 0; attempt < 2; attempt++) {
      const [outcome] = await sandbox.evaluate("t", [expression], input, 10_000, "value");
      expect(outcome).toMatchObject({ ok: false, kind: expect.any(String) });
      expect(kinds).toContain((outcome as Extract<Outcome, { ok: false }>).kind);
    }
    expect(await sandbox.evaluate("t", ["2 * 21"], {}, 1_000, "value")).toEqual([{ ok: true, value: 42 }]);
  });
});
