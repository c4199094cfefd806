// Upgrading an existing PostgreSQL database: the migration that counts
// queued runs (0012) must count those queued before it, and its triggers
// keep counting after, a TRUNCATE included.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { migratePostgres, openPostgres, type OpenedPostgres } from "../src/store/postgres/open.js";
import { queuedCount } from "../src/store/postgres/runs.js";
import { createTestDatabase, type TestDatabase } from "./support/postgres.js";
import { migrationsBefore } from "./support/migrations.js";

describe("PostgreSQL migrations", () => {
  let dir: string;
  let database: TestDatabase;
  let opened: OpenedPostgres;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "agentplane-migrate-pg-"));
    database = await createTestDatabase();
    opened = openPostgres({ url: database.url, poolSize: 2 });
  });
  afterEach(async () => {
    await opened.sql.end({ timeout: 5 });
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("counts the runs queued before the counts existed (0012), then keeps counting", async () => {
    const { sql } = opened;
    await migrate(opened.db, { migrationsFolder: migrationsBefore("postgres", dir, "0012") });
    const t = Date.now();
    await sql`insert into tenants (id, slug, create_time, update_time) values ('ten_1', 'ten_1', ${t}, ${t}), ('ten_2', 'ten_2', ${t}, ${t})`;
    await sql`
      insert into runs (id, tenant_id, agent_id, status, attempt, steps, error, create_time, update_time)
      select id, tenant, 'agt_1', status, 0, '[]', '', ${t}, ${t}
      from (values ('run_1', 'ten_1', 'queued'), ('run_2', 'ten_1', 'queued'), ('run_3', 'ten_1', 'succeeded'), ('run_4', 'ten_2', 'queued'))
        as r(id, tenant, status)`;

    await migratePostgres(opened);
    expect([await queuedCount(sql, "ten_1"), await queuedCount(sql, "ten_2"), await queuedCount(sql, "ten_3")]).toEqual([2, 1, 0]);
    await sql`update runs set status = 'cancelled' where id = 'run_1'`;
    expect(await queuedCount(sql, "ten_1")).toBe(1);
    // By hand, past every row trigger: the counts go with the runs.
    await sql`truncate runs`;
    expect([await queuedCount(sql, "ten_1"), await queuedCount(sql, "ten_2")]).toEqual([0, 0]);
  });
});
