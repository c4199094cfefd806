import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { PATIENCE_MS, waitFor } from "./wait.js";

// The built binary (`make build`), as operators run it.
export const CLI = join(process.cwd(), "dist/bin/agentplane.js");

const exec = promisify(execFile);

// One `agentplane <args>` command to its end, with only PATH inherited.
export function runCli(args: string[], env: Record<string, string>) {
  return exec(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? "", ...env } });
}

// Data dirs for CLI processes, each under a fresh temporary directory.
export class DataDirs {
  private readonly made: string[] = [];

  constructor(private readonly prefix: string) {}

  make(): string {
    const dir = mkdtempSync(join(tmpdir(), this.prefix));
    this.made.push(dir);
    return dir;
  }

  // One with tenant `slug` created by the CLI, `admin` its admin.
  async withTenant(slug: string, admin: string): Promise<string> {
    const dir = this.make();
    await runCli(["tenant", "create", slug, "--admin", admin], { AGENTPLANE_DATA_DIR: dir });
    return dir;
  }

  removeAll(): void {
    for (const dir of this.made) rmSync(dir, { recursive: true, force: true });
  }
}

// What `serve` needs to trust the tokens `idp` signs.
export function jwtEnv(idp: { issuer: string; audience: string; jwks: { url: string } }): Record<string, string> {
  return {
    AGENTPLANE_AUTH_MODE: "jwt",
    AGENTPLANE_JWT_ISSUER: idp.issuer,
    AGENTPLANE_JWT_AUDIENCE: idp.audience,
    AGENTPLANE_JWKS_URL: idp.jwks.url,
  };
}

// `serve` on a SQLite data dir, trusting `idp`, with a fixed secret key and
// skills on loopback allowed.
export function serveEnv(dataDir: string, idp: Parameters<typeof jwtEnv>[0]): Record<string, string> {
  return {
    AGENTPLANE_DATA_DIR: dataDir,
    ...jwtEnv(idp),
    AGENTPLANE_SECRET_KEY: Buffer.alloc(32, 7).toString("base64"),
    AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8",
  };
}

export interface Caller {
  token: string;
  tenant: string;
}

// A Connect JSON unary call as `caller`; anything but 200 throws with the body.
export async function platformCall<T>(base: { url: string }, caller: Caller, method: string, body: unknown): Promise<T> {
  const res = await fetch(`${base.url}/platform.v1.PlatformService/${method}`, {
    method: "POST",
    headers: { authorization: `Bearer ${caller.token}`, "x-platform-tenant": caller.tenant, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

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
  // fails at once if the process exits. A timeout says what the process
  // printed and what /readyz last answered, so that a start that never ends
  // can be told from a slow one.
  async ready<T = true>(what: string, also: () => T | undefined = () => true as T): Promise<T> {
    let lastAnswer = "no answer yet";
    try {
      return await waitFor(what, PATIENCE_MS, async () => {
        if (this.exited) throw new Error(`${what}: the process exited early (${this.exitCode}):\n${this.output}`);
        const value = also();
        if (value === undefined) return undefined;
        const ok = await fetch(`${this.url}/readyz`).then(
          async (r) => ((lastAnswer = `${r.status} ${await r.text()}`), r.status === 200),
          (err: unknown) => ((lastAnswer = String(err)), false),
        );
        return ok ? value : undefined;
      });
    } catch (err) {
      if (this.exited || !(err instanceof Error)) throw err;
      throw new Error(`${err.message}; /readyz last answered: ${lastAnswer}; the process printed:\n${this.output.slice(-8000)}`, { cause: err });
    }
  }

  // Ready once the `agentplane dev` banner names the dev client.
  async devClient(): Promise<{ clientId: string; clientSecret: string }> {
    return this.ready("agentplane dev to be ready", () => {
      const banner = /dev client: (\S+) \/ (\S+)/.exec(this.output);
      return banner ? { clientId: banner[1]!, clientSecret: banner[2]! } : undefined;
    });
  }

  // An access token of the dev client, from the embedded dev issuer.
  async devClientToken(client: { clientId: string; clientSecret: string }): Promise<string> {
    const res = await fetch(`${this.url}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ client_id: client.clientId, client_secret: client.clientSecret, grant_type: "client_credentials" }),
    });
    return ((await res.json()) as { access_token: string }).access_token;
  }

  async scrape(): Promise<string> {
    const res = await fetch(`${this.url}/metrics`);
    expect(res.status).toBe(200);
    return res.text();
  }

  // A graceful stop, as an operator's SIGTERM.
  async stop(): Promise<void> {
    if (!this.exited) this.child.kill("SIGTERM");
    await this.exit;
  }

  async kill(): Promise<void> {
    this.killSent = true;
    if (!this.exited) this.child.kill("SIGKILL");
    await this.exit;
  }

  // What a failed test left running; resolves once each of them has exited.
  static async killAll(): Promise<void> {
    const exits = [...running].map((child) => new Promise((resolve) => child.once("exit", resolve)));
    for (const child of running) child.kill("SIGKILL");
    await Promise.all(exits);
  }
}

// `agentplane serve <args>` whose API a test calls as one caller.
export class ServeProcess extends CliProcess {
  constructor(
    args: string[],
    env: Record<string, string>,
    port: number,
    readonly caller: Caller,
  ) {
    super(["serve", ...args], env, port);
  }

  call<T>(method: string, body: unknown): Promise<T> {
    return platformCall<T>(this, this.caller, method, body);
  }
}
