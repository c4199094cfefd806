// A bench that ends half-way must not leave its `serve` running beside the
// next measurement, nor its files and database behind: whatever ends it, its
// children are stopped, its scratch directories removed and its registered
// undos run before it exits (bench/lib/run.ts).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const FIXTURE = join(process.cwd(), "dist/test/support/bench-that-ends.js");

let work: string;
beforeAll(() => (work = mkdtempSync(join(tmpdir(), "agentplane-bench-cleanup-"))));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

interface Ended {
  code: number | null;
  child: number;
  dir: string;
  undone: boolean;
}

// Runs the fixture in `mode`; `stop` ends it from outside once it has started.
async function runFixture(mode: string, stop?: (bench: ReturnType<typeof spawn>) => void): Promise<Ended> {
  const marker = join(work, `${mode}-undone`);
  const bench = spawn(process.execPath, [FIXTURE, mode, marker], { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  bench.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = once(bench, "exit");
  const lines = createInterface({ input: bench.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error(`the fixture printed nothing: ${stderr}`);
  const { child, dir } = JSON.parse(first.value) as { child: number; dir: string };
  expect(alive(child)).toBe(true);
  expect(existsSync(dir)).toBe(true);
  bench.stdin!.write("go\n");
  stop?.(bench);
  const [code] = (await exited) as [number | null];
  return { code, child, dir, undone: existsSync(marker) && readFileSync(marker, "utf8") === "undone" };
}

test.each([
  ["its main resolves without its own cleanup", "resolve", 0],
  ["its main rejects", "reject", 1],
  ["an error is thrown outside its main", "throw", 1],
])("when %s, the bench stops its child, removes its scratch directory and undoes what it registered before it exits", async (_what, mode, code) => {
  const ended = await runFixture(mode);
  expect(ended.code).toBe(code);
  expect(alive(ended.child)).toBe(false);
  expect(existsSync(ended.dir)).toBe(false);
  expect(ended.undone).toBe(true);
});

test.each([
  ["SIGINT", 130],
  ["SIGTERM", 143],
  ["SIGHUP", 129],
] as const)("interrupted with %s, the bench stops its child, undoes what it registered and exits with %i", async (signal, code) => {
  const ended = await runFixture("progress", (bench) => void bench.kill(signal));
  expect(ended.code).toBe(code);
  expect(alive(ended.child)).toBe(false);
  expect(existsSync(ended.dir)).toBe(false);
  expect(ended.undone).toBe(true);
});

test("with its stdout closed (`bench | head -1`), the bench stops its child and undoes what it registered", async () => {
  const ended = await runFixture("progress", (bench) => void bench.stdout!.destroy());
  expect(ended.code).toBe(1);
  expect(alive(ended.child)).toBe(false);
  expect(existsSync(ended.dir)).toBe(false);
  expect(ended.undone).toBe(true);
});
