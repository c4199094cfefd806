import { readdirSync, readFileSync } from "node:fs";

// The expression sandbox processes this process started (Linux /proc): its
// children whose command line is the sandbox's (src/integrations/expressions/sandbox.ts).
export function sandboxPids(): number[] {
  const children = readdirSync(`/proc/${process.pid}/task`).flatMap((tid) =>
    readFileSync(`/proc/${process.pid}/task/${tid}/children`, "utf8").split(" ").filter(Boolean).map(Number),
  );
  return children.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes("--stack-size=2000");
    } catch {
      return false; // exited meanwhile
    }
  });
}

// Stops (SIGSTOP) the sandbox processes started since `before` was read: a
// machine that leaves them no CPU at all. Answers a function that lets those
// still alive go on.
export function starve(before: number[]): () => void {
  const pids = sandboxPids().filter((pid) => !before.includes(pid));
  if (!pids.length) throw new Error("no sandbox process to stop");
  for (const pid of pids) process.kill(pid, "SIGSTOP");
  return () => {
    for (const pid of pids)
      try {
        process.kill(pid, "SIGCONT");
      } catch {
        // killed by the sandbox's watchdog meanwhile
      }
  };
}

// Sandbox options for a test that asserts what an expression's CPU budget
// does: the wall ceiling at 1000 times the budget instead of 20, so a loaded
// machine (a sandbox process at nice 10 beside busy jest workers) cannot
// turn the budget's outcome into `overloaded`. The ceiling's own tests stop
// the processes instead (starve above).
export const CPU_BUDGET_ONLY = { wallCeiling: 1000 };
