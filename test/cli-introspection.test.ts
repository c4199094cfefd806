// `agentplane serve` in introspection mode as an operator runs it (the built
// binary): the limits are read from the environment, and an IdP that refuses
// the service's own credentials is reported in the log, not blamed on callers.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freeLoopbackPort } from "./support/listen.js";
import { startScriptedIdp, type ScriptedIdp } from "./support/scripted-introspection.js";

const CLI = join(process.cwd(), "dist/bin/agentplane.js");
const CLIENT_SECRET = "service-secret-0123456789";

function run(env: Record<string, string>): { child: ChildProcessWithoutNullStreams; output: () => string; exited: Promise<number | null> } {
  const child = spawn("node", [CLI, "serve"], { env: { PATH: process.env.PATH, ...env } });
  let output = "";
  child.stdout.on("data", (c: Buffer) => (output += c.toString("utf8")));
  child.stderr.on("data", (c: Buffer) => (output += c.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  return { child, output: () => output, exited };
}


describe("agentplane serve with introspection", () => {
  let dataDir: string;
  let idp: ScriptedIdp;
  const baseEnv = () => ({
    AGENTPLANE_DATA_DIR: dataDir,
    AGENTPLANE_SECRET_KEY: randomBytes(32).toString("base64"),
    AGENTPLANE_AUTH_MODE: "introspection",
    AGENTPLANE_INTROSPECTION_URL: idp.url,
    AGENTPLANE_INTROSPECTION_CLIENT_ID: "agentplane",
    AGENTPLANE_INTROSPECTION_CLIENT_SECRET: CLIENT_SECRET,
    AGENTPLANE_HOST: "127.0.0.1",
  });

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "agentplane-cli-introspection-"));
    idp = await startScriptedIdp(() => ({ status: 401, body: { error: "invalid_client" } }));
  });
  afterAll(async () => {
    await idp?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("refuses introspection limits that make no sense, naming the variable", async () => {
    const { exited, output } = run({
      ...baseEnv(),
      AGENTPLANE_INTROSPECTION_MAX_CONCURRENT: "0",
      AGENTPLANE_INTROSPECTION_NEGATIVE_CACHE_SECONDS: "ten",
    });
    expect(await exited).toBe(1);
    expect(output()).toContain("AGENTPLANE_INTROSPECTION_MAX_CONCURRENT must be at least 1");
    expect(output()).toContain('AGENTPLANE_INTROSPECTION_NEGATIVE_CACHE_SECONDS must be a non-negative integer, got "ten"');
  });

  it("answers 503 when the IdP refuses the service's credentials, and logs it for the operator without the secret", async () => {
    const port = await freeLoopbackPort();
    const { child, output, exited } = run({ ...baseEnv(), AGENTPLANE_PORT: String(port) });
    try {
      const url = `http://127.0.0.1:${port}`;
      for (let i = 0; ; i++) {
        if ((await fetch(`${url}/healthz`).catch(() => undefined))?.ok) break;
        if (i > 100) throw new Error(`serve did not start:\n${output()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const token = randomBytes(32).toString("base64url");
      const res = await fetch(`${url}/platform.v1.PlatformService/ListAgents`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "x-platform-tenant": "acme" },
        body: "{}",
      });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { code: string }).code).toBe("unavailable");
      // The log line reaches the pipe on its own schedule, not with the answer.
      const errorLineOf = () =>
        output()
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { level: number; msg: string })
          .find((l) => l.level === 50);
      for (let i = 0; i < 40 && !errorLineOf(); i++) await new Promise((r) => setTimeout(r, 50));
      expect(errorLineOf()?.msg).toMatch(/introspection answered HTTP 401.*credentials/);
      expect(output()).not.toContain(CLIENT_SECRET);
      expect(output()).not.toContain(token);
    } finally {
      child.kill("SIGTERM");
      await exited;
    }
  });
});
