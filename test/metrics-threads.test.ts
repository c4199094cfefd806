// /metrics of the built binary, where runs execute in worker threads: the
// HTTP thread's scrape includes what the threads counted (runs, skill calls),
// tenant-labelled by slug when asked; an api process shows the queue it
// fills, a worker process the runs it executes.
import { CliProcess, DataDirs, ServeProcess, serveEnv } from "./support/cli-process.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { startSigningIdp, type SigningIdp } from "./support/jwks-server.js";
import { freeLoopbackPort } from "./support/listen.js";
import { duplicateFamilies, sampleValue } from "./support/prometheus.js";
import { sleep, waitFor } from "./support/wait.js";

const OPERATOR = "ops";

let idp: SigningIdp;
let token: string;
let customer: CustomerMcp;
const dirs = new DataDirs("agentplane-metrics-");

class Serve extends ServeProcess {
  constructor(dataDir: string, port: number, args: string[], env: Record<string, string> = {}) {
    super(args, { ...serveEnv(dataDir, idp), AGENTPLANE_LOG_LEVEL: "warn", ...env }, port, { token, tenant: "acme" });
  }
}

const dataDir = () => dirs.withTenant("acme", OPERATOR);

async function agentsCalling(api: Serve): Promise<{ echo: string; fail: string }> {
  const { skill } = await api.call<{ skill: { id: string } }>("CreateSkill", { skill: { name: "tools", mcpUrl: customer.url } });
  const agent = async (tool: string, args: string) =>
    (await api.call<{ agent: { id: string } }>("CreateAgent", { agent: { name: tool, skillIds: [skill.id], steps: [{ skillId: skill.id, tool, arguments: args }] } })).agent.id;
  return { echo: await agent("echo", '{"text": "hi"}'), fail: await agent("fail", "{}") };
}

const runAgent = (api: Serve, id: string) => api.call("RunAgent", { id });

beforeAll(async () => {
  idp = await startSigningIdp("https://idp.metrics-threads.test", "https://api.metrics-threads.test");
  token = await idp.sign(OPERATOR);
  customer = await startOpenMcp();
});

afterAll(async () => {
  await CliProcess.killAll();
  await customer?.close();
  await idp?.close();
  dirs.removeAll();
});

// Runs finished as the scrape reports them, once `n` are counted.
const finished = (serve: Serve, labels: Record<string, string>, n: number) =>
  waitFor(`${n} runs counted`, 20_000, async () => {
    const text = await serve.scrape();
    return (sampleValue(text, "agentplane_runs_finished_total", labels) ?? 0) >= n ? text : undefined;
  }, 100);

describe("/metrics with runs in worker threads", () => {
  it("includes the threads' run and skill call counts, tenant-labelled by slug", async () => {
    const serve = new Serve(await dataDir(), await freeLoopbackPort(), [], { AGENTPLANE_WORKER_THREADS: "2", AGENTPLANE_METRICS_TENANT_LABEL: "on" });
    try {
      await serve.ready("agentplane serve to be ready");
      const agents = await agentsCalling(serve);
      for (let i = 0; i < 3; i++) await runAgent(serve, agents.echo);
      await runAgent(serve, agents.fail);
      await finished(serve, { status: "succeeded", error_kind: "none", tenant: "acme" }, 3);
      const text = await finished(serve, { status: "failed", error_kind: "tool_error", tenant: "acme" }, 1);
      expect(sampleValue(text, "agentplane_runs_finished_total", { status: "succeeded", error_kind: "none", tenant: "acme" })).toBe(3);
      expect(sampleValue(text, "agentplane_skill_calls_total", { outcome: "ok", tenant: "acme" })).toBe(3);
      expect(sampleValue(text, "agentplane_skill_calls_total", { outcome: "tool_error", tenant: "acme" })).toBe(1);
      expect(sampleValue(text, "agentplane_run_duration_seconds_count", { status: "succeeded" })).toBe(3);
      // Zero-initialized in every thread, summed: still zero.
      expect(sampleValue(text, "agentplane_schedule_slots_total", { outcome: "missed" })).toBe(0);
      // The JWKS was fetched by the HTTP thread, the counters kept there.
      expect(sampleValue(text, "agentplane_jwks_fetches_total", { outcome: "ok" })).toBe(1);
      expect(text).not.toMatch(/tenant="ten_/);
      expect(duplicateFamilies(text)).toEqual([]);
      // Counters never go back between scrapes.
      expect(sampleValue(await serve.scrape(), "agentplane_skill_calls_total", { outcome: "ok", tenant: "acme" })).toBe(3);
    } finally {
      await serve.stop();
    }
  });

  it("an api process reports the queue it fills; the worker process executing the runs reports them", async () => {
    const dir = await dataDir();
    const api = new Serve(dir, await freeLoopbackPort(), ["--role", "api"]);
    let worker: Serve | undefined;
    try {
      await api.ready("the api process to be ready");
      const agents = await agentsCalling(api);
      await runAgent(api, agents.echo);
      await runAgent(api, agents.echo);
      await sleep(1100);
      const queued = await api.scrape();
      expect(sampleValue(queued, "agentplane_runs_queued")).toBe(2);
      expect(sampleValue(queued, "agentplane_runs_queued_oldest_age_seconds")).toBeGreaterThanOrEqual(1);

      worker = new Serve(dir, await freeLoopbackPort(), ["--role", "worker"]);
      await worker.ready("the worker process to be ready");
      const text = await finished(worker, { status: "succeeded", error_kind: "none" }, 2);
      expect(sampleValue(text, "agentplane_skill_calls_total", { outcome: "ok" })).toBe(2);
      // The api process executed nothing.
      expect(sampleValue(await api.scrape(), "agentplane_runs_finished_total", { status: "succeeded", error_kind: "none" })).toBeUndefined();
      // Read at most every 5 s: the api process sees the queue drained within that.
      await waitFor("the queue to drain", 10_000, async () => (sampleValue(await api.scrape(), "agentplane_runs_queued") === 0 ? true : undefined), 250);
    } finally {
      await worker?.stop();
      await api.stop();
    }
  });
});
