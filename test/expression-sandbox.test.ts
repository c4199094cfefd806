// The expression sandbox itself (real child processes): where each kind of
// expression runs, what a runaway one costs, and fairness between tenants.
import { ExpressionSandbox } from "../src/integrations/expressions/sandbox.js";
import { CPU_BUDGET_ONLY, sandboxPids, starve } from "./support/sandbox-processes.js";

const ENDLESS = "( $f := function($x){ $f($x + 1) }; $f(0) )";

describe("expression sandbox", () => {
  let sandbox: ExpressionSandbox;
  const overruns: string[] = [];

  beforeAll(() => {
    sandbox = new ExpressionSandbox({ workers: 2, maxQueuedPerTenant: 50, ...CPU_BUDGET_ONLY, onOverrun: (mode, kind) => overruns.push(`${mode}:${kind}`) });
    sandbox.warm();
  });
  afterAll(() => sandbox.close());

  it("answers filters and values, JSON only", async () => {
    const input = { payload: { total: 250, tags: ["a", "b"] } };
    expect(await sandbox.evaluate("t", ["payload.total > 100", "payload.total", "$count(payload.tags)"], input, 1000, "filter")).toEqual([
      { ok: true, value: true },
      { ok: true, value: false }, // a number is not a yes
      { ok: true, value: false },
    ]);
    expect(await sandbox.evaluate("t", ['{"n": payload.total, "f": function($x){$x}}', "[1..3]"], input, 1000, "value")).toEqual([
      { ok: true, value: { n: 250 } },
      { ok: true, value: [1, 2, 3] },
    ]);
    expect(await sandbox.evaluate("t", ["payload.(", "$undefinedFunction()"], input, 1000, "value")).toEqual([
      { ok: false, kind: "error", message: expect.any(String) },
      { ok: false, kind: "error", message: expect.any(String) },
    ]);
  });

  it("hands a bounded expression that overruns its inline slice to a process, with the full budget", async () => {
    const items = Array.from({ length: 60_000 }, (_, i) => ({ i }));
    const [outcome] = await sandbox.evaluate("t", ["$count(payload.items[i > 59990]) = 9"], { payload: { items } }, 5000, "filter");
    expect(outcome).toEqual({ ok: true, value: true });
  });

  it("runs a tenant's bounded expressions inline only within its share of the service thread", async () => {
    const placed: string[] = [];
    // A slice (the budget, 5 s) far longer than any evaluation here, so
    // that only the share, not a slice run out on a loaded machine, sends an
    // expression away.
    const limited = new ExpressionSandbox({ inlineMsPerSecond: 5, inlineSliceMs: 5000, onPlaced: (_mode, where) => placed.push(where) });
    try {
      const items = Array.from({ length: 5_000 }, (_, i) => ({ i }));
      const heavy = "$count(payload.items[i > 4990]) = 9"; // bounded, but a few ms on this payload (20 cold on a slow machine)
      // Inline until its 5 ms of the second are spent, then in a process.
      for (let n = 0; n < 20 && !placed.includes("sandbox"); n++)
        expect(await limited.evaluate("heavy", [heavy], { payload: { items } }, 5000, "filter")).toEqual([{ ok: true, value: true }]);
      expect(placed[0]).toBe("inline");
      expect(placed.at(-1)).toBe("sandbox");
      placed.length = 0;
      // Another tenant's share is its own.
      expect(await limited.evaluate("light", ["payload.n = 1"], { payload: { n: 1 } }, 5000, "filter")).toEqual([{ ok: true, value: true }]);
      expect(placed).toEqual(["inline"]);
    } finally {
      await limited.close();
    }
  });

  it("matches a short regular expression inline, and one whose match could outlast a slice in a process", async () => {
    const placed: string[] = [];
    // Placed by the pattern and the input's length, not by a slice run out
    // on a loaded machine: the slice is longer than any match here.
    const placing = new ExpressionSandbox({ workers: 1, inlineSliceMs: 5000, onPlaced: (_mode, where) => placed.push(where) });
    try {
      const email = "$contains(payload.email, /@example\\.com$/i)";
      expect(await placing.evaluate("t", [email], { payload: { email: "Jane@Example.com" } }, 5000, "filter")).toEqual([{ ok: true, value: true }]);
      expect(placed).toEqual(["inline"]);
      // RE2 is linear, but one match is one uninterruptible loop: 200,000
      // characters against this pattern is past what a slice may hold.
      placed.length = 0;
      const long = { payload: { email: "a".repeat(200_000) + "!" } };
      expect(await placing.evaluate("t", ["$contains(payload.email, /^(a+)+$/)"], long, 5000, "filter")).toEqual([{ ok: true, value: false }]);
      expect(placed).toEqual(["sandbox"]);
      // Counted repetition and a range folded to other cases compile to a
      // program longer than the pattern, and a long pattern is long to
      // match: none is inline.
      placed.length = 0;
      const small = { payload: { email: "ab" } };
      const patterns = ["/a{2,900}/", `/${"(a|b)".repeat(60)}/`, "/[x-\u{1E942}]/i"];
      const outcomes = await placing.evaluate("t", patterns.map((p) => `$contains(payload.email, ${p})`), small, 1000, "filter");
      expect(outcomes).toEqual(patterns.map(() => ({ ok: true, value: false })));
      expect(placed).toEqual(patterns.map(() => "sandbox"));
    } finally {
      await placing.close();
    }
  });

  // The budgets are CPU time (a loaded machine stretches them in wall time),
  // so these tests read the sandbox's own account of what an expression
  // used, not a stopwatch.
  it("cuts off an expression that never returns, and keeps serving", async () => {
    // Unbudgeted it never answers: answering at all is the cut-off.
    expect(await sandbox.evaluate("t", [ENDLESS, "1 = 1"], {}, 100, "filter")).toEqual([
      { ok: false, kind: "timeout", message: expect.any(String) },
      { ok: true, value: true },
    ]);
    expect(overruns).toContain("filter:timeout");
  });

  it("stops a process the machine gives no CPU at the wall ceiling as overloaded, not as the expression's timeout", async () => {
    const before = sandboxPids();
    const seen: string[] = [];
    const starved = new ExpressionSandbox({ workers: 1, inlineSliceMs: 0, onOverrun: (mode, kind) => seen.push(`${mode}:${kind}`) });
    try {
      expect(await starved.evaluate("t", ["1 + 1"], {}, 10, "value")).toEqual([{ ok: true, value: 2 }]);
      const resume = starve(before);
      let outcome;
      try {
        [outcome] = await starved.evaluate("t", ["1 + 1"], {}, 10, "value");
      } finally {
        resume();
      }
      expect(outcome).toEqual({ ok: false, kind: "overloaded", message: expect.stringMatching(/^evaluation was stopped after \d+ ms with \d+ ms of its 10 ms CPU budget used: the service is overloaded$/) });
      // Within its budget: /proc counts CPU time in clock ticks (10 ms), and a
      // process stopped mid-tick can be charged the tick (seen with another
      // make test beside this one: "with 10 ms of its 10 ms").
      const used = Number(/with (\d+) ms of its/.exec((outcome as { message: string }).message)![1]);
      expect(used).toBeLessThanOrEqual(10);
      // Not an overrun of the expression's, and the sandbox serves on.
      expect(seen).toEqual([]);
      expect(await starved.evaluate("t", ["1 + 1"], {}, 10, "value")).toEqual([{ ok: true, value: 2 }]);
    } finally {
      starved.close();
    }
  });

  it("cuts off a native step that never yields (a quadratic builtin) by killing its process", async () => {
    // Unbudgeted, this one step computes for over 10 s of CPU.
    const items = Array.from({ length: 30_000 }, (_, i) => ({ i }));
    const [outcome] = await sandbox.evaluate("t", ["$count($distinct(payload.items))"], { payload: { items } }, 100, "value");
    // Stopped at its budget (+ slack, the watchdog's 10 ms rounds, /proc's
    // 10 ms ticks): a timeout; or earlier by the wall ceiling on a machine
    // too loaded to give it a core, which says so (overloaded). A watchdog
    // late under load adds little: the process runs at a lower priority
    // than the service.
    const { kind, message } = outcome as { kind: string; message: string };
    expect(["timeout", "overloaded"]).toContain(kind);
    const cpuMs = Number((kind === "timeout" ? /it used (\d+) ms of CPU time/ : /with (\d+) ms of its/).exec(message)?.[1]);
    expect(cpuMs).toBeLessThan(500);
    expect(await sandbox.evaluate("t", ["1 + 1"], {}, 100, "value")).toEqual([{ ok: true, value: 2 }]);
  });

  it(
    "survives an expression that exhausts its process's memory",
    async () => {
      // A small heap, and a budget no loaded machine reaches first (the
      // process runs at nice 10): it is the memory limit that stops it.
      // 200 arrays of 100,000 numbers, each well within the size limits
      // (AGENTPLANE_EXPRESSION_MAX_CHARS, 10^6 items), together far past 32 MB.
      const small = new ExpressionSandbox({ workers: 1, memoryMb: 32 });
      try {
        const [outcome] = await small.evaluate("t", ['[1..200].{"a": [1..100000]}'], {}, 300_000, "value");
        expect(outcome).toMatchObject({ ok: false, kind: "memory" });
        expect(await small.evaluate("t", ["2 * 21"], {}, 100, "value")).toEqual([{ ok: true, value: 42 }]);
        // Not bounded: a process evaluates it, the one that replaced the lost one.
        expect(await small.evaluate("t", ["$sum([1..3].($ * 2))"], {}, 60_000, "value")).toEqual([{ ok: true, value: 12 }]);
      } finally {
        await small.close();
      }
    },
    400_000,
  );

  it("serves tenants round-robin: one tenant's queue of runaway filters delays another's by about one budget", async () => {
    // Counted in jobs served ahead of it, not milliseconds: a loaded machine
    // stretches every budget alike.
    let noisyDone = 0;
    const flood = Array.from({ length: 12 }, () => sandbox.evaluate("noisy", [ENDLESS], {}, 100, "filter").then(() => noisyDone++));
    await new Promise((r) => setTimeout(r, 50));
    // Not bounded, so it goes through the processes, behind the noisy queue.
    expect(await sandbox.evaluate("quiet", ["$sum([1..3].($ * 2)) = 12"], {}, 100, "filter")).toEqual([{ ok: true, value: true }]);
    const aheadOfQuiet = noisyDone;
    await Promise.all(flood);
    // In a FIFO the quiet one would wait for all 12; fair, for at most the
    // jobs already running on the 2 processes, and the ones taken while it
    // was being queued.
    expect(aheadOfQuiet).toBeLessThanOrEqual(4);
  }, 300_000); // room, not a measure: each job's process runs at nice 10 on a loaded machine

  it("serves by slot time, not turns: two tenants' slow expressions delay another's quick ones by about one each", async () => {
    // Both processes are held by the slow tenants (one each, their share);
    // by turns, quiet's ten quick jobs would each wait behind one slow job of
    // each, so all sixteen slow jobs would be served before quiet's last.
    // Counted in jobs, not milliseconds: a loaded machine stretches all alike.
    let slowDone = 0;
    const slow = ["slow-a", "slow-b"].flatMap((tenant) => Array.from({ length: 8 }, () => sandbox.evaluate(tenant, [ENDLESS], {}, 50, "filter").then(() => slowDone++)));
    await new Promise((r) => setTimeout(r, 50));
    const quick = await Promise.all(Array.from({ length: 10 }, () => sandbox.evaluate("quiet", ["$sum([1..3].($ * 2)) = 12"], {}, 1000, "filter")));
    const aheadOfQuiet = slowDone;
    await Promise.all(slow);
    for (const outcome of quick) expect(outcome).toEqual([{ ok: true, value: true }]);
    // The ones running when quiet came, and at most one more per process.
    expect(aheadOfQuiet).toBeLessThanOrEqual(6);
  }, 300_000); // room, not a measure: each job's process runs at nice 10 on a loaded machine

  it("keeps serving a tenant whose expression was cut off on the second process while the first stood idle", async () => {
    const fresh = new ExpressionSandbox({ workers: 2, ...CPU_BUDGET_ONLY });
    try {
      fresh.warm();
      await new Promise((r) => setTimeout(r, 1500)); // both processes ready
      const SANDBOXED = "$sum([1..3]) = 6"; // a range: never inline
      // "quick" takes the first process and is done at once; "runaway"'s
      // first filter, a native step that never yields, takes the second and
      // is killed with the first idle; the rest of its job must still run.
      const quick = fresh.evaluate("quick", [SANDBOXED], {}, 5000, "filter");
      const items = Array.from({ length: 30_000 }, (_, i) => ({ i }));
      const runaway = fresh.evaluate("runaway", ["$count($distinct(payload.items)) > 1", SANDBOXED], { payload: { items } }, 200, "filter");
      expect(await quick).toEqual([{ ok: true, value: true }]);
      // Before the fix it never settled (jest's timeout ends that wait).
      expect(await runaway).toEqual([
        { ok: false, kind: "timeout", message: expect.stringContaining("stopped") },
        { ok: true, value: true },
      ]);
    } finally {
      await fresh.close();
    }
  });

  it("refuses at once past a tenant's waiting limit", async () => {
    const jobs = Array.from({ length: 60 }, () => sandbox.evaluate("greedy", [ENDLESS], {}, 20, "filter").then(() => "done", (e: Error) => e.name));
    const settled = await Promise.all(jobs);
    expect(settled.filter((s) => s === "SandboxBacklogError").length).toBeGreaterThan(0);
    expect(settled.filter((s) => s === "done").length).toBeGreaterThanOrEqual(50);
  });
});
