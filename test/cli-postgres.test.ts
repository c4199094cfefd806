// The operator commands on PostgreSQL (the built binary), selected by
// AGENTPLANE_DATABASE_URL, and the refusal of a URL of another kind.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import postgres from "postgres";
import { createTestDatabase, type TestDatabase } from "./support/postgres.js";
import { join } from "node:path";

const exec = promisify(execFile);
const CLI = join(process.cwd(), "dist/bin/agentplane.js");

async function agentplane(args: string[], env: Record<string, string>) {
  return exec("node", [CLI, ...args], { env: { PATH: process.env.PATH, ...env }, timeout: 20_000 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
}

describe("agentplane CLI on PostgreSQL", () => {
  let db: TestDatabase;
  // The test database's URL with a password in it (ignored by trust auth),
  // to see that no output shows it.
  let url: string;
  let password: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    const u = new URL(db.url);
    if (!u.password) u.password = "hunter2-secret";
    password = u.password;
    url = u.toString();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("refuses a database URL that is not PostgreSQL, without echoing it", async () => {
    const res = await agentplane(["migrate"], { AGENTPLANE_DATABASE_URL: "mysql://root:topsecret@db/agentplane" });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("AGENTPLANE_DATABASE_URL must be a postgres:// or postgresql:// URL");
    expect(res.stderr).not.toContain("topsecret");
  });

  it("migrates, creates a tenant with its admin, adds a member, and exits", async () => {
    const env = { AGENTPLANE_DATABASE_URL: url, AGENTPLANE_DATABASE_POOL_SIZE: "2" };
    const migrated = await agentplane(["migrate"], env);
    const { host, pathname } = new URL(db.url);
    expect(migrated).toMatchObject({ code: 0, stdout: expect.stringMatching(/^migrated postgres:\/\//) });
    expect(migrated.stdout).toContain(`${host}${pathname}`);
    expect(migrated.stdout + migrated.stderr).not.toContain(`:${password}@`);
    const created = await agentplane(["tenant", "create", "acme", "--admin", "client-1"], env);
    expect(created).toMatchObject({ code: 0, stdout: expect.stringMatching(/created tenant acme \(ten_/) });
    expect(created.stderr).toContain(`database postgres://${new URL(url).username}:***@${host}${pathname}`);
    expect(created.stdout + created.stderr).not.toContain(password);
    expect((await agentplane(["member", "add", "acme", "client-2", "--role", "viewer"], env)).code).toBe(0);
    const dup = await agentplane(["tenant", "create", "acme"], env);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain('tenant "acme" already exists');

    const sql = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      expect(await sql`select subject, role from members order by subject`).toEqual([
        { subject: "client-1", role: "admin" },
        { subject: "client-2", role: "viewer" },
      ]);
    } finally {
      await sql.end();
    }
  });
});
