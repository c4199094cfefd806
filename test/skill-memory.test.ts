// Memory a skill call leaves behind (issue 19, item 4): nothing of a call may
// stay attached to the long-lived signals a run hands down, and the pool of
// clients and OAuth sessions holds a bounded number of skills whatever the
// number of skills, versions and deletions a process has seen.
import { spawn } from "node:child_process";
import { getEventListeners, once } from "node:events";
import { join } from "node:path";
import { SkillPool, type SkillConnection } from "../src/integrations/mcp-client/skill-pool.js";
import { SkillClient } from "../src/integrations/mcp-client/skill-client.js";
import { createOutboundFetch } from "../src/integrations/outbound/outbound.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";

const fetch = createOutboundFetch({ allow: ["127.0.0.0/8"], maxResponseBytes: 1 << 20 });
let mcp: CustomerMcp;

beforeAll(async () => {
  mcp = await startOpenMcp();
});
afterAll(() => mcp.close());

const connection = (skillId: string, version = 1): SkillConnection => ({ skillId, key: `${skillId}@${version}`, url: mcp.url, auth: { mode: "none" } });

test("a tool call leaves no listener on the signal it was given", async () => {
  const client = await SkillClient.connect({ url: mcp.url, auth: { mode: "none" }, fetch, callTimeoutMs: 10_000, version: "test" });
  try {
    const run = new AbortController();
    for (let i = 0; i < 5; i++) {
      const result = await client.callTool("add", { a: i, b: 1 }, `key-${i}`, run.signal);
      expect(result.structuredContent).toEqual({ sum: i + 1 });
    }
    // The SDK listens on the signal for the call's sake; a listener left
    // behind keeps the call (request, response handlers) alive as long as
    // the signal, and fires a cancellation of a finished call on abort.
    expect(getEventListeners(run.signal, "abort")).toHaveLength(0);
    const before = mcp.requestLog().length;
    run.abort();
    await client.callTool("add", { a: 1, b: 1 }, "after", new AbortController().signal);
    expect(mcp.requestLog().slice(before).flatMap((r) => r.rpcMethods)).toEqual(["tools/call"]);
  } finally {
    await client.close();
  }
});

test("a call aborted through the signal it was given still fails as aborted", async () => {
  const client = await SkillClient.connect({ url: mcp.url, auth: { mode: "none" }, fetch, callTimeoutMs: 10_000, version: "test" });
  try {
    const run = new AbortController();
    const call = client.callTool("slow", { ms: 60_000 }, "slow", run.signal);
    await new Promise<void>((resolve) => {
      const poll = () => (mcp.toolCalls().some((c) => c.name === "slow") ? resolve() : setTimeout(poll, 10));
      poll();
    });
    run.abort(new Error("run cancelled"));
    await expect(call).rejects.toMatchObject({ kind: "skill_timeout" });
    expect(getEventListeners(run.signal, "abort")).toHaveLength(0);
  } finally {
    await client.close();
  }
});

describe("the skill pool is bounded", () => {
  test("a skill edited many times keeps one version", async () => {
    const pool = new SkillPool({ fetch, discoveryTimeoutMs: 1000, callTimeoutMs: 1000, version: "test" });
    try {
      for (let v = 1; v <= 20; v++) await pool.client(connection("skl_a", v));
      expect(pool.size).toBe(1);
      // The current version is still the pooled one.
      const c = await pool.client(connection("skl_a", 20));
      expect(await pool.client(connection("skl_a", 20))).toBe(c);
    } finally {
      await pool.close();
    }
  });

  test("many distinct skills: at most maxSkills, the least recently used go first", async () => {
    const pool = new SkillPool({ fetch, discoveryTimeoutMs: 1000, callTimeoutMs: 1000, version: "test", maxSkills: 3 });
    try {
      const kept = await pool.client(connection("skl_kept"));
      for (let i = 0; i < 10; i++) {
        await pool.client(connection(`skl_${i}`));
        // Used between the others: never the least recent.
        expect(await pool.client(connection("skl_kept"))).toBe(kept);
      }
      expect(pool.size).toBe(3);
    } finally {
      await pool.close();
    }
  });

  test("skills not used for idleMs (deleted ones) are dropped, OAuth sessions with them", async () => {
    let now = 0;
    const pool = new SkillPool({ fetch, discoveryTimeoutMs: 1000, callTimeoutMs: 1000, version: "test", idleMs: 60_000, now: () => now });
    try {
      for (let i = 0; i < 10; i++) await pool.client(connection(`skl_${i}`));
      // OAuth sessions are made before any connection succeeds (this one cannot).
      const oauth: SkillConnection = { skillId: "skl_oauth", key: "skl_oauth@1", url: "http://127.0.0.1:1/mcp", auth: { mode: "oauth", issuer: "http://127.0.0.1:1", clientId: "c", clientSecret: "s", scopes: [], audience: "" } };
      await pool.client(oauth).catch(() => {});
      expect(pool.size).toBe(11);
      now += 60_000;
      await pool.client(connection("skl_live"));
      expect(pool.size).toBe(1);
    } finally {
      await pool.close();
    }
  });
});

test("the client's own long-lived signal does not collect a listener per request", async () => {
  const client = await SkillClient.connect({ url: mcp.url, auth: { mode: "none" }, fetch, callTimeoutMs: 10_000, version: "test" });
  try {
    // The SDK transport's signal, passed to every request it makes (internal: no public accessor).
    const transport = (client as unknown as { client: { transport: { _abortController: AbortController } } }).client.transport;
    const signal = transport._abortController.signal;
    for (let i = 0; i < 100; i++) await client.callTool("add", { a: i, b: 1 }, `key-${i}`, new AbortController().signal);
    expect(getEventListeners(signal, "abort").length).toBeLessThanOrEqual(1);
  } finally {
    await client.close();
  }
});

test("many calls in flight on one client raise no listener-leak warning: one listener each is what they hold", async () => {
  // In a process of its own: Node prints the warning to stderr, once a process.
  const child = spawn(process.execPath, [join(process.cwd(), "dist/test/support/concurrent-skill-calls.js")], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, "exit")) as [number | null];
  expect({ code, stdout: stdout.trim() }).toEqual({ code: 0, stdout: "done 40" });
  expect(stderr).not.toMatch(/MaxListenersExceededWarning/);
});
