import { availableParallelism, cpus, loadavg } from "node:os";

// "node v20.19.0, 8 CPUs (model), load average 0.5 0.3 0.2 at the start": the
// machine line of a bench's header.
export function describeHost(): string {
  const cpuModel = cpus()[0]?.model.trim() ?? "unknown CPU";
  return `node ${process.version}, ${availableParallelism()} CPUs (${cpuModel}), ${describeLoad()} at the start`;
}

// What else the machine was doing: a figure is only as good as its load.
export const describeLoad = () => `load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`;

// Runs a bench's main and exits: 0 when it resolves, 1 with the error when it
// rejects (the exit also ends anything main left open).
export function runBench(main: () => Promise<void>): void {
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
