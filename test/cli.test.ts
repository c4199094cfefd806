// The `agentplane` command as an operator runs it (the built binary).
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import { SecretBox } from "../src/lib/secret-box.js";
import { signingSecretContext } from "../src/service/webhook-deliveries.js";
import { startHeadersMcp, startOpenMcp, startStaticBearerMcp } from "./support/customer-mcp.js";

const exec = promisify(execFile);
const CLI = join(process.cwd(), "dist/bin/agentplane.js");

async function agentplane(args: string[], env: Record<string, string> = {}) {
  return exec("node", [CLI, ...args], { env: { PATH: process.env.PATH, ...env } }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
}

describe("agentplane CLI", () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), "agentplane-cli-"));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it("refuses to serve without a real identity provider, saying what to set", async () => {
    const res = await agentplane(["serve"], { AGENTPLANE_DATA_DIR: dataDir });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("AGENTPLANE_AUTH_MODE is required");
    expect(res.stderr).toContain("AGENTPLANE_SECRET_KEY is required");
    expect(res.stderr).toContain("agentplane dev");
  });

  it("refuses a half-configured jwt mode", async () => {
    const res = await agentplane(["serve"], { AGENTPLANE_AUTH_MODE: "jwt", AGENTPLANE_DATA_DIR: dataDir });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("AGENTPLANE_JWT_ISSUER is required with AGENTPLANE_AUTH_MODE=jwt");
  });

  it("refuses HTTP limits that cannot hold, naming the variables", async () => {
    const res = await agentplane(["serve"], {
      AGENTPLANE_DATA_DIR: dataDir,
      AGENTPLANE_HTTP_MAX_CONNECTIONS: "100000000",
      AGENTPLANE_HTTP_HEADERS_TIMEOUT_MS: "60000",
      AGENTPLANE_HTTP_REQUEST_TIMEOUT_MS: "30000",
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/AGENTPLANE_HTTP_MAX_CONNECTIONS \(100000000\) must leave 256 of the process's \d+ open files free/);
    expect(res.stderr).toContain("AGENTPLANE_HTTP_HEADERS_TIMEOUT_MS must not exceed AGENTPLANE_HTTP_REQUEST_TIMEOUT_MS");
  });

  it("migrates, creates a tenant with its admin, and adds a member", async () => {
    const env = { AGENTPLANE_DATA_DIR: dataDir };
    expect((await agentplane(["migrate"], env)).code).toBe(0);
    const created = await agentplane(["tenant", "create", "acme", "--admin", "client-1"], env);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/created tenant acme \(ten_/);
    expect((await agentplane(["member", "add", "acme", "client-2", "--role", "viewer"], env)).code).toBe(0);

    const db = new Database(join(dataDir, "agentplane.db"), { readonly: true });
    const rows = db.prepare("select subject, role from members order by subject").all();
    db.close();
    expect(rows).toEqual([
      { subject: "client-1", role: "admin" },
      { subject: "client-2", role: "viewer" },
    ]);

    const dup = await agentplane(["tenant", "create", "acme"], env);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain('tenant "acme" already exists');
    const badSlug = await agentplane(["tenant", "create", "Acme!"], env);
    expect(badSlug.stderr).toContain("tenant.slug");
  });

  it("creates signed sources: the URL, a generated secret once, sealed with the service's key", async () => {
    const env = { AGENTPLANE_DATA_DIR: dataDir };
    expect((await agentplane(["tenant", "create", "hooks"], env)).code).toBe(0);
    const noKey = await agentplane(["source", "create", "hooks", "gh", "--kind", "github"], env);
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toContain("AGENTPLANE_SECRET_KEY");
    const badKind = await agentplane(["source", "create", "hooks", "x", "--kind", "gitlab"], env);
    expect(badKind.code).toBe(1);
    expect(badKind.stderr).toContain("--kind: must be envelope, standard_webhooks, github, stripe");
    // A name every object has is no kind either.
    const inherited = await agentplane(["source", "create", "hooks", "x", "--kind", "toString"], env);
    expect(inherited.code).toBe(1);
    expect(inherited.stderr).toContain('--kind: must be envelope, standard_webhooks, github, stripe; got "toString"');

    const key = randomBytes(32).toString("base64");
    const sealing = { ...env, AGENTPLANE_SECRET_KEY: key, AGENTPLANE_PUBLIC_URL: "https://hooks.example.test/" };
    const gh = await agentplane(["source", "create", "hooks", "gh", "--kind", "github"], sealing);
    expect(gh.code).toBe(0);
    expect(gh.stdout).toContain("created github webhook source gh (src_");
    expect(gh.stdout).toMatch(/url .*: https:\/\/hooks\.example\.test\/webhooks\/sources\/src_[0-9a-f-]{36}\n/);
    const secret = /signing secret \(shown once[^)]*\): ([0-9a-f]{64})\n/.exec(gh.stdout)?.[1];
    expect(secret).toBeDefined();
    const db = new Database(join(dataDir, "agentplane.db"), { readonly: true });
    const row = db.prepare("select id, kind, token_digest, signing_secret from webhook_sources where name = 'gh'").get() as Record<string, string | null>;
    db.close();
    expect(row).toMatchObject({ kind: "github", token_digest: null });
    expect(SecretBox.fromBase64(key).open(row.signing_secret!, signingSecretContext(row.id!))).toBe(secret);

    const noStripeSecret = await agentplane(["source", "create", "hooks", "st", "--kind", "stripe"], sealing);
    expect(noStripeSecret.code).toBe(1);
    expect(noStripeSecret.stderr).toContain("webhook_source.signing_secret: is required for Stripe");
    const st = await agentplane(["source", "create", "hooks", "st", "--kind", "stripe", "--signing-secret", "whsec_" + "a1".repeat(16)], sealing);
    expect(st.code).toBe(0);
    expect(st.stdout).toContain("signing secret: the one given, stored encrypted");
    expect(st.stdout).not.toContain("whsec_");
    const help = await agentplane(["source", "create", "--help"]);
    expect(help.stdout).toContain("--kind <kind>");
    expect(help.stdout).toContain("--signing-secret <secret>");
  });

  it("keeps the configured per-tenant quotas when adding members", async () => {
    const env = { AGENTPLANE_DATA_DIR: dataDir, AGENTPLANE_QUOTA_MEMBERS: "2" };
    expect((await agentplane(["tenant", "create", "small", "--admin", "a-1"], env)).code).toBe(0);
    expect((await agentplane(["member", "add", "small", "v-1", "--role", "viewer"], env)).code).toBe(0);
    const over = await agentplane(["member", "add", "small", "v-2", "--role", "viewer"], env);
    expect(over.code).toBe(1);
    expect(over.stderr).toContain("AGENTPLANE_QUOTA_MEMBERS");
  });

  it("probes a skill as the runtime would: tools listed, or the failing step named", async () => {
    const open = await startOpenMcp();
    const guarded = await startStaticBearerMcp("right");
    try {
      const allow = { AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8" };
      const ok = await agentplane(["skill", "probe", "--url", open.url], allow);
      expect(ok.code).toBe(0);
      expect(ok.stdout).toContain("5 tool(s)");
      expect(ok.stdout).toContain("  echo");
      const refused = await agentplane(["skill", "probe", "--url", guarded.url, "--bearer", "wrong"], allow);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("skill_unauthorized");
      const blocked = await agentplane(["skill", "probe", "--url", open.url]);
      expect(blocked.code).toBe(1);
      expect(blocked.stderr).toContain("outbound_blocked");
    } finally {
      await open.close();
      await guarded.close();
    }
  });

  it("probes a headers skill with --header, refusing the names the service refuses", async () => {
    const keyed = await startHeadersMcp({ "X-API-Key": "probe-key-77" });
    try {
      const allow = { AGENTPLANE_OUTBOUND_ALLOW: "127.0.0.0/8" };
      const ok = await agentplane(["skill", "probe", "--url", keyed.url, "--header", "X-API-Key: probe-key-77"], allow);
      expect(ok.code).toBe(0);
      expect(ok.stdout).toContain("(headers)");
      const wrong = await agentplane(["skill", "probe", "--url", keyed.url, "--header", "X-API-Key: nope-nope"], allow);
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain("skill_unauthorized");
      expect(wrong.stderr).not.toContain("nope-nope");
      const reserved = await agentplane(["skill", "probe", "--url", keyed.url, "--header", "Host: evil.example"], allow);
      expect(reserved.code).toBe(2);
      expect(reserved.stderr).toContain('"Host" is set by the transport');
      const malformed = await agentplane(["skill", "probe", "--url", keyed.url, "--header", "no colon"], allow);
      expect(malformed.code).toBe(2);
      expect(malformed.stderr).toContain("--header must be");
    } finally {
      await keyed.close();
    }
  });

  it("prints usage for an unknown command", async () => {
    const res = await agentplane(["frobnicate"]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("usage:");
  });

  it("gives each command its own --help", async () => {
    for (const args of [["tenant", "create", "--help"], ["tenant", "create", "-h"], ["member", "add", "acme", "--help"]]) {
      const res = await agentplane(args);
      expect({ args, code: res.code }).toEqual({ args, code: 0 });
      const command = `agentplane ${args[0]} ${args[1]}`;
      expect(res.stdout).toContain(command);
      expect(res.stdout).not.toContain("skill probe");
    }
    const tenant = await agentplane(["tenant", "create", "--help"]);
    expect(tenant.stdout).toContain("--admin <subject>");
    expect(tenant.stdout).toContain("--display-name <name>");
    const all = await agentplane(["--help"]);
    expect(all.code).toBe(0);
    for (const command of ["serve", "dev", "migrate", "tenant create", "member add", "source create", "skill probe"])
      expect(all.stdout).toContain(`agentplane ${command}`);
  });

  it("explains itself: no command is a usage error, a group lists its commands, serve and dev their variables", async () => {
    const groups = ["tenant", "member", "source", "skill"];
    const [none, frob, bare, serve, dev, ...listed] = await Promise.all([
      agentplane([]),
      agentplane(["tenant", "frob", "--help"]),
      agentplane(["tenant"]),
      agentplane(["serve", "--help"]),
      agentplane(["dev", "--help"]),
      ...groups.map((g) => agentplane([g, "--help"])),
    ]);
    expect({ code: none.code, stdout: none.stdout }).toEqual({ code: 2, stdout: "" });
    expect(none.stderr).toContain("no command given");
    expect(none.stderr).toContain("agentplane serve");
    expect(frob.code).toBe(2);
    expect(frob.stderr).toContain('unknown command "tenant frob"');
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain("tenant needs a command");
    expect(bare.stderr).toContain("agentplane tenant create <slug>");
    const commands: Record<string, string[]> = { tenant: ["tenant create"], member: ["member add"], source: ["source create"], skill: ["skill probe"] };
    for (const [i, group] of groups.entries()) {
      const res = listed[i]!;
      expect({ group, code: res.code }).toEqual({ group, code: 0 });
      for (const command of commands[group]!) expect(res.stdout).toContain(`agentplane ${command}`);
      expect(res.stdout).not.toContain("agentplane serve");
    }
    for (const [res, variables] of [
      [serve, ["AGENTPLANE_PORT", "AGENTPLANE_DATA_DIR", "AGENTPLANE_PUBLIC_URL", "AGENTPLANE_DATABASE_URL", "AGENTPLANE_ROLE"]],
      [dev, ["AGENTPLANE_PORT", "AGENTPLANE_DATA_DIR", "AGENTPLANE_PUBLIC_URL", "AGENTPLANE_DATABASE_URL"]],
    ] as const) {
      expect(res.code).toBe(0);
      for (const name of variables) expect(res.stdout).toMatch(new RegExp(`^  ${name} +\\S.*\\(default: .+\\)$`, "m"));
    }
    expect(serve.stdout).toContain("(default: 8080)");
    expect(dev.stdout).not.toContain("AGENTPLANE_ROLE");
  });

  it("refuses unknown options and extra arguments with the command's usage, exit 2", async () => {
    const cases: [string[], string][] = [
      [["tenant", "create", "acme", "--colour", "red"], "unknown option '--colour'"],
      // Known to another command, not to this one.
      [["member", "add", "acme", "someone", "--admin", "x"], "unknown option '--admin'"],
      [["serve", "--nope"], "unknown option '--nope'"],
      [["tenant", "create", "acme", "extra"], "unexpected argument \"extra\""],
      [["member", "add", "--role"], "option '--role <value>' argument missing"],
    ];
    for (const [args, message] of cases) {
      const res = await agentplane(args, { AGENTPLANE_DATA_DIR: join(dataDir, "untouched") });
      expect({ args, code: res.code }).toEqual({ args, code: 2 });
      expect(res.stderr).toContain(message);
      expect(res.stderr).toContain(`usage: agentplane ${args[0]}`);
    }
    expect(existsSync(join(dataDir, "untouched"))).toBe(false);
  });

  it("says which database a store command uses, and creates nothing when the input is refused", async () => {
    const fresh = join(dataDir, "fresh");
    const env = { AGENTPLANE_DATA_DIR: fresh };
    const refused: [string[], string][] = [
      [["tenant", "create", "Not A Slug!"], "tenant.slug"],
      [["tenant", "create", "acme", "--display-name", "x".repeat(201)], "tenant.display_name"],
      [["member", "add", "acme", "x".repeat(1000)], "member.subject"],
      [["member", "add", "acme", "someone", "--role", "owner"], "--role must be admin or viewer"],
      [["source", "create", "acme", "x".repeat(201)], "webhook_source.name"],
      [["source", "create", "Not A Slug!", "shop"], "tenant"],
      // No database yet: no tenant to add to, and none is made to say so.
      [["member", "add", "acme", "someone"], 'tenant "acme" not found'],
      [["source", "create", "acme", "shop"], 'tenant "acme" not found'],
    ];
    for (const [args, message] of refused) {
      const res = await agentplane(args, env);
      expect({ args, code: res.code }).toEqual({ args, code: 1 });
      expect(res.stderr).toContain(message);
      expect({ args, created: existsSync(fresh) }).toEqual({ args, created: false });
    }
    const created = await agentplane(["tenant", "create", "acme"], env);
    expect(created.code).toBe(0);
    expect(created.stderr).toContain(`database ${join(fresh, "agentplane.db")}`);
    const source = await agentplane(["source", "create", "acme", "shop"], env);
    expect(source.code).toBe(0);
    expect(source.stderr).toContain(`database ${join(fresh, "agentplane.db")}`);
    expect(source.stdout).toContain("created webhook source shop");
  });
});
