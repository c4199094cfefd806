import { availableParallelism, cpus, loadavg } from "node:os";

// "node v20.19.0, 8 CPUs (model), load average 0.5 0.3 0.2 at the start": the
// machine line of a bench's header.
export function describeHost(): string {
  const cpuModel = cpus()[0]?.model.trim() ?? "unknown CPU";
  return `node ${process.version}, ${availableParallelism()} CPUs (${cpuModel}), ${describeLoad()} at the start`;
}

// What else the machine was doing: a figure is only as good as its load.
export const describeLoad = () => `load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`;

// What an interrupted bench must still undo and an exit handler cannot (it
// runs no asynchronous work): a PostgreSQL database it created, say.
const onInterrupt = new Set<() => Promise<void>>();
const INTERRUPT_CLEANUP_MS = 10_000;

// `undo` runs if the bench is interrupted (SIGINT, SIGTERM) before the
// returned function is called.
export function undoIfInterrupted(undo: () => Promise<void>): () => void {
  onInterrupt.add(undo);
  return () => onInterrupt.delete(undo);
}

// Runs a bench's main and exits: 0 when it resolves, 1 with the error when it
// rejects (the exit also ends anything main left open); 130 when interrupted,
// once what was registered with undoIfInterrupted is undone (or after 10 s).
export function runBench(main: () => Promise<void>): void {
  for (const signal of ["SIGINT", "SIGTERM"] as const)
    process.once(signal, () => {
      const undone = Promise.allSettled([...onInterrupt].map((undo) => undo()));
      const timeout = new Promise((resolve) => setTimeout(resolve, INTERRUPT_CLEANUP_MS).unref());
      void Promise.race([undone, timeout]).finally(() => process.exit(130));
    });
  main().then(
    () => {
      console.log(`${describeLoad()} at the end`);
      process.exit(0);
    },
    (err: unknown) => {
      console.error(`\nbench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      process.exit(1);
    },
  );
}
