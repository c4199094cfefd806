import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";

// "node v20.19.0, 8 CPUs (model), load average 0.5 0.3 0.2 at the start": the
// machine line of a bench's header.
export function describeHost(): string {
  const cpuModel = cpus()[0]?.model.trim() ?? "unknown CPU";
  return `node ${process.version}, ${availableParallelism()} CPUs (${cpuModel}), ${describeLoad()} at the start`;
}

// What else the machine was doing: a figure is only as good as its load.
export const describeLoad = () => `load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`;

// What a bench leaves behind when it ends half-way is what the next
// measurement runs beside: a `serve` child still taking CPU, its database,
// its files. So whatever ends a bench (its main's end, an error, an
// interrupt, a closed stdout) ends its children first, then undoes what it
// registered, then exits.
const children = new Set<ChildProcess>();
const scratch = new Set<string>();
const toUndo = new Set<() => Promise<void>>();
// How long a child may take to stop on SIGTERM (a `serve` ends its runs and
// closes its database) before SIGKILL, and what is undone may take.
const CHILD_STOP_MS = 10_000;
const UNDO_MS = 10_000;

// `child` is stopped when the bench ends, however it ends.
export function ownChild<C extends ChildProcess>(child: C): C {
  if (child.exitCode === null && child.signalCode === null) {
    children.add(child);
    child.once("exit", () => children.delete(child));
  }
  return child;
}

// A new temporary directory, removed when the bench exits, however it exits.
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.add(dir);
  return dir;
}

export function removeScratchDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  scratch.delete(dir);
}

// `undo` runs before the bench exits, however it ends, unless the returned
// function was called first (the bench's own cleanup did it): a PostgreSQL
// database it created, say, which an exit handler cannot drop (it runs
// nothing asynchronous).
export function undoBeforeExit(undo: () => Promise<void>): () => void {
  toUndo.add(undo);
  return () => toUndo.delete(undo);
}

// The last resort when something calls process.exit directly: only
// synchronous work runs here.
process.once("exit", () => {
  for (const child of children) child.kill("SIGKILL");
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

async function stopChild(child: ChildProcess): Promise<void> {
  if (!children.has(child)) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), CHILD_STOP_MS);
  await exited;
  clearTimeout(timer);
}

let ending = false;
async function end(code: number): Promise<never> {
  if (!ending) {
    ending = true;
    await Promise.allSettled([...children].map(stopChild));
    const undone = Promise.allSettled([...toUndo].map((undo) => undo()));
    const timeout = new Promise((resolve) => setTimeout(resolve, UNDO_MS).unref());
    await Promise.race([undone, timeout]);
    process.exit(code);
  }
  return new Promise<never>(() => {});
}

const describeError = (err: unknown) => (err instanceof Error ? (err.stack ?? err.message) : String(err));

// Runs a bench's main and exits: 0 when it resolves, 1 with the error when it
// rejects or something throws outside it; 1 too when its stdout is closed
// (`| head`), 128 + the signal's number when interrupted.
export function runBench(main: () => Promise<void>): void {
  for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143], ["SIGHUP", 129]] as const) process.once(signal, () => void end(code));
  // A closed stdout fails the next write; the bench's figures can no longer be read.
  process.stdout.on("error", () => void end(1));
  process.on("uncaughtException", (err) => {
    console.error(`\nbench failed: ${describeError(err)}`);
    void end(1);
  });
  main().then(
    () => {
      console.log(`${describeLoad()} at the end`);
      void end(0);
    },
    (err: unknown) => {
      console.error(`\nbench failed: ${describeError(err)}`);
      void end(1);
    },
  );
}
