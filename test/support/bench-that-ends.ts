// A bench in miniature for test/bench-cleanup.test.ts, run from its build
// (dist/test/support). Like a real one it starts a child that would run on
// (a `serve`), a scratch directory (its SQLite file) and something only an
// asynchronous undo removes (its PostgreSQL database; here a file), prints
// them as one JSON line, waits for a line on stdin (the test has seen them
// running), then ends as argv[2] says:
// - resolve: main ends, its own cleanup not done;
// - reject: main fails;
// - throw: an error thrown outside main;
// - progress: a progress line every 10 ms until stopped from outside (a
//   signal, or its stdout closed).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { ownChild, runBench, scratchDir, undoBeforeExit } from "../../bench/lib/run.js";

const mode = process.argv[2];
const undoneMarker = process.argv[3]!;

runBench(async () => {
  const child = ownChild(spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" }));
  const dir = scratchDir("agentplane-bench-that-ends-");
  undoBeforeExit(async () => writeFileSync(undoneMarker, "undone"));
  console.log(JSON.stringify({ child: child.pid, dir }));
  await once(process.stdin, "data");
  if (mode === "reject") throw new Error("the bench failed half-way");
  if (mode === "throw") setImmediate(() => {
    throw new Error("thrown outside main");
  });
  if (mode === "progress") setInterval(() => console.log("progress"), 10);
  if (mode !== "resolve") await new Promise<never>(() => {});
});
