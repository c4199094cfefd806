import { availableParallelism, cpus } from "node:os";

// "node v20.19.0, 8 CPUs (model)": the machine line of a bench's header.
export function describeHost(): string {
  const cpuModel = cpus()[0]?.model.trim() ?? "unknown CPU";
  return `node ${process.version}, ${availableParallelism()} CPUs (${cpuModel})`;
}

// Runs a bench's main and exits: 0 when it resolves, 1 with the error when it
// rejects (the exit also ends anything main left open).
export function runBench(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(`\nbench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      process.exit(1);
    },
  );
}
