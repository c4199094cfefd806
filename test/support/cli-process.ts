import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { waitFor } from "./wait.js";

// The built binary (`make build`), as operators run it.
export const CLI = join(process.cwd(), "dist/src/cli/main.js");

const running = new Set<ChildProcess>();

// One `agentplane <args>` process on a loopback port: its output kept (the
// last 100–200 KB, for failure messages), its exit awaited.
export class CliProcess {
  readonly child: ChildProcess;
  output = "";
  // Undefined while it runs; null when a signal ended it.
  exitCode: number | null | undefined;
  // Set when SIGKILL is sent; errors of requests in flight are expected then.
  killSent = false;
  readonly exit: Promise<void>;

  constructor(
    args: string[],
    env: Record<string, string>,
    readonly port: number,
    readonly host = "127.0.0.1",
  ) {
    this.child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? "", AGENTPLANE_HOST: host, ...env, AGENTPLANE_PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    running.add(this.child);
    const keep = (chunk: Buffer) => {
      this.output += chunk.toString("utf8");
      if (this.output.length > 200_000) this.output = this.output.slice(-100_000);
    };
    this.child.stdout!.on("data", keep);
    this.child.stderr!.on("data", keep);
    this.exit = new Promise((resolve) =>
      this.child.once("exit", (code) => {
        this.exitCode = code;
        running.delete(this.child);
        resolve();
      }),
    );
  }

  get exited(): boolean {
    return this.exitCode !== undefined;
  }

  get url(): string {
    return `http://${this.host}:${this.port}`;
  }

  // Waits until `also` gives a value (when given) and /readyz answers 200;
  // fails at once if the process exits.
  async ready<T = true>(what: string, timeoutMs: number, also: () => T | undefined = () => true as T): Promise<T> {
    return waitFor(what, timeoutMs, async () => {
      if (this.exited) throw new Error(`${what}: the process exited early (${this.exitCode}):\n${this.output}`);
      const value = also();
      if (value === undefined) return undefined;
      const ok = await fetch(`${this.url}/readyz`).then(
        async (r) => (await r.arrayBuffer(), r.status === 200),
        () => false,
      );
      return ok ? value : undefined;
    });
  }

  async kill(): Promise<void> {
    this.killSent = true;
    if (!this.exited) this.child.kill("SIGKILL");
    await this.exit;
  }

  // What a failed test left running.
  static killAll(): void {
    for (const child of running) child.kill("SIGKILL");
  }
}
