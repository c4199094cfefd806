import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { undoBeforeExit } from "./run.js";

// The server the benches use; each session gets a database of its own.
const ADMIN_URL = process.env.AGENTPLANE_BENCH_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
// Where the benches' databases are, for a bench's header.
export const BENCH_POSTGRES_HOST = new URL(ADMIN_URL).host;

// A database created for one session (a random name), and its drop, done
// also when the bench is interrupted.
export async function freshDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `agentplane_bench_${randomBytes(6).toString("hex")}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const drop = async () => {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  };
  const dropped = undoBeforeExit(drop);
  return {
    url: url.toString(),
    async drop() {
      dropped();
      await drop();
    },
  };
}
