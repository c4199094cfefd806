// Upgrading an existing SQLite file: a migration that rebuilds a table
// (0010 makes webhook_sources.token_digest nullable) must keep the rows and
// every reference to them, although SQLite cannot turn foreign keys off
// inside the migrator's transaction. Likewise one that makes names unique
// (0013) must keep the records whose names repeat, and the one that counts
// queued runs (0016) must count those queued before it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { openSqlite } from "../src/store/sqlite/open.js";
import { createSqliteStore } from "../src/store/sqlite/store.js";
import { migrationsBefore } from "./support/migrations.js";

describe("SQLite migrations", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "agentplane-migrate-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("rebuilds webhook_sources under existing triggers and events without losing a row or a reference", () => {
    const path = join(dir, "agentplane.db");
    const old = openSqlite({ path });
    migrate(old.db, { migrationsFolder: migrationsBefore("sqlite", dir, "0010") });
    const t = Date.now();
    old.raw.prepare("insert into tenants (id, slug, create_time, update_time) values ('ten_1', 'acme', ?, ?)").run(t, t);
    old.raw
      .prepare(
        `insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, enabled, create_time, update_time)
         values ('agt_1', 'ten_1', 'a', '{"skillIds":[],"allowedTools":[],"steps":[]}', 16, 120000, 1, ?, ?)`,
      )
      .run(t, t);
    old.raw
      .prepare(
        `insert into webhook_sources (id, tenant_id, name, enabled, token_digest, create_time, update_time)
         values ('src_1', 'ten_1', 'github', 1, 'digest-1', ?, ?)`,
      )
      .run(t, t);
    old.raw
      .prepare(
        `insert into triggers (id, tenant_id, agent_id, enabled, kind, source_id, event_type_pattern, create_time, update_time)
         values ('trg_1', 'ten_1', 'agt_1', 1, 'webhook', 'src_1', 'push', ?, ?)`,
      )
      .run(t, t);
    old.raw.close();

    const store = createSqliteStore({ path });
    const check = openSqlite({ path });
    try {
      const source = check.raw.prepare("select * from webhook_sources").get() as Record<string, unknown>;
      expect(source).toMatchObject({ id: "src_1", kind: "envelope", token_digest: "digest-1", signing_secret: null, mapping: null });
      expect(check.raw.prepare("select source_id from triggers").get()).toEqual({ source_id: "src_1" });
      expect(check.raw.pragma("foreign_key_check")).toEqual([]);
      expect(check.raw.pragma("foreign_keys", { simple: true })).toBe(1);
      // The rebuilt table still tells other processes of its changes (0011).
      expect(check.raw.prepare("select name from sqlite_master where type = 'trigger' and tbl_name = 'webhook_sources' order by name").all()).toEqual([
        { name: "webhook_sources_deleted" },
        { name: "webhook_sources_inserted" },
        { name: "webhook_sources_updated" },
      ]);
      // The references still hold: the source cannot go while a trigger uses it.
      expect(() => check.raw.prepare("delete from webhook_sources where id = 'src_1'").run()).toThrow(/FOREIGN KEY/);
    } finally {
      check.raw.close();
      void store.close();
    }
  });

  it("keeps every record when names become unique per tenant (0013): a later duplicate gets its id appended", () => {
    const path = join(dir, "agentplane.db");
    const old = openSqlite({ path });
    migrate(old.db, { migrationsFolder: migrationsBefore("sqlite", dir, "0013") });
    const t = Date.now();
    for (const [id, slug] of [["ten_1", "acme"], ["ten_2", "globex"]]) old.raw.prepare("insert into tenants (id, slug, create_time, update_time) values (?, ?, ?, ?)").run(id, slug, t, t);
    // Two in acme share a name (the older keeps it), globex's may use it too.
    const rows: [string, string, number][] = [["x_2", "ten_1", t], ["x_1", "ten_1", t - 1], ["x_3", "ten_2", t], ["x_4", "ten_1", t]];
    for (const [id, tenant, time] of rows) {
      old.raw
        .prepare(
          `insert into agents (id, tenant_id, name, spec, max_steps, timeout_ms, enabled, create_time, update_time)
           values (?, ?, 'same', '{"skillIds":[],"allowedTools":[],"steps":[]}', 16, 120000, 1, ?, ?)`,
        )
        .run(`agt${id}`, tenant, time, time);
      old.raw.prepare("insert into skills (id, tenant_id, name, mcp_url, auth, tools, create_time, update_time) values (?, ?, 'same', 'https://mcp.example/mcp', '{\"mode\":\"none\"}', '[]', ?, ?)").run(`skl${id}`, tenant, time, time);
      old.raw.prepare("insert into webhook_sources (id, tenant_id, name, enabled, token_digest, create_time, update_time) values (?, ?, 'same', 1, ?, ?, ?)").run(`src${id}`, tenant, `digest${id}`, time, time);
    }
    old.raw.close();

    const store = createSqliteStore({ path });
    const check = openSqlite({ path });
    try {
      for (const [table, prefix] of [["agents", "agt"], ["skills", "skl"], ["webhook_sources", "src"]]) {
        expect(check.raw.prepare(`select id, name from ${table} order by id`).all()).toEqual([
          { id: `${prefix}x_1`, name: "same" },
          { id: `${prefix}x_2`, name: `same (${prefix}x_2)` },
          { id: `${prefix}x_3`, name: "same" },
          { id: `${prefix}x_4`, name: `same (${prefix}x_4)` },
        ]);
      }
    } finally {
      check.raw.close();
      void store.close();
    }
  });

  it("counts the runs queued before the counts existed (0016), then keeps counting", async () => {
    const path = join(dir, "agentplane.db");
    const old = openSqlite({ path });
    migrate(old.db, { migrationsFolder: migrationsBefore("sqlite", dir, "0016") });
    const t = Date.now();
    for (const id of ["ten_1", "ten_2"]) old.raw.prepare("insert into tenants (id, slug, create_time, update_time) values (?, ?, ?, ?)").run(id, id, t, t);
    const runs: [string, string, string][] = [["run_1", "ten_1", "queued"], ["run_2", "ten_1", "queued"], ["run_3", "ten_1", "succeeded"], ["run_4", "ten_2", "queued"]];
    for (const [id, tenant, status] of runs)
      old.raw
        .prepare("insert into runs (id, tenant_id, agent_id, status, attempt, steps, error, create_time, update_time) values (?, ?, 'agt_1', ?, 0, '[]', '', ?, ?)")
        .run(id, tenant, status, t, t);
    old.raw.close();

    const store = createSqliteStore({ path });
    try {
      expect([await store.runs.queuedCount("ten_1"), await store.runs.queuedCount("ten_2"), await store.runs.queuedCount("ten_3")]).toEqual([2, 1, 0]);
      expect(await store.queue.cancel("ten_1", "run_1", t + 1)).toMatchObject({ status: "cancelled" });
      expect(await store.runs.queuedCount("ten_1")).toBe(1);
    } finally {
      await store.close();
    }
  });
});
