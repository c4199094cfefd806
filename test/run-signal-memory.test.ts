// A finished run leaves nothing alive (issue 19, item 4): the signal a run
// hands its steps is what SDKs (MCP, OpenAI) attach listeners to and never
// detach, so whatever keeps that signal alive after the run keeps every call
// of the run alive with it. Built on AbortSignal.timeout and AbortSignal.any,
// it stayed alive for the agent's whole timeout (120 s by default) after the
// run had ended: Node keeps a timeout or composite signal that has abort
// listeners until it fires.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import pino from "pino";
import { UNRECORDED_TRIES } from "../src/lib/call-tries.js";
import { createAgentExecutor } from "../src/runtime/agent-executor.js";
import type { ExpressionSandbox } from "../src/integrations/expressions/sandbox.js";
import type { ChatModel } from "../src/integrations/model/chat-model.js";
import type { SecretBox } from "../src/lib/secret-box.js";
import type { ToolCaller } from "../src/runtime/tool-calls.js";
import type { AgentRow, RunRow, SkillRow } from "../src/store/rows.js";
import type { Store } from "../src/store/store.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const skill = { id: "skl_1", tenantId: "ten_1" } as SkillRow;
const agentOf = (timeoutMs: number) =>
  ({ id: "agt_1", tenantId: "ten_1", timeoutMs, spec: { steps: [{ skillId: "skl_1", tool: "t", arguments: "" }], allowedTools: {} } }) as unknown as AgentRow;
const run = { id: "run_1", tenantId: "ten_1", agentId: "agt_1", eventId: null, input: null } as unknown as RunRow;
// `end` answers what the run keeps of the result (here all of it).
const step = { end: (outcome: { result?: unknown }) => outcome.result, ...UNRECORDED_TRIES };

function executor(timeoutMs: number, call: ToolCaller["call"]) {
  const store = { agents: { get: async () => agentOf(timeoutMs) }, skills: { get: async () => skill }, events: { get: async () => undefined } } as unknown as Store;
  return createAgentExecutor({
    store,
    secrets: {} as SecretBox,
    tools: { call },
    models: {} as ChatModel,
    log: pino({ level: "silent" }),
    sandbox: {} as ExpressionSandbox,
    stepBudgetMs: 1000,
  });
}

test("the signal a run gave its steps is garbage once the run has finished", async () => {
  const seen: WeakRef<AbortSignal>[] = [];
  const exec = executor(120_000, async (_skill, _tool, _args, _key, signal) => {
    // As the SDKs do: a listener for the call's sake, never removed.
    signal.addEventListener("abort", () => {});
    seen.push(new WeakRef(signal));
    return { result: "ok", error: "" };
  });
  const worker = new AbortController();
  for (let i = 0; i < 20; i++) expect(await exec.execute(run, { signal: worker.signal, startStep: () => step, resume: () => undefined })).toEqual({ status: "succeeded", output: "ok" });
  // Let the last run's promise chain settle, then collect.
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  expect(seen.filter((s) => s.deref() !== undefined)).toHaveLength(0);
});

test("the agent's timeout still aborts a step and ends the run timed_out", async () => {
  let aborted: unknown;
  const exec = executor(50, (_skill, _tool, _args, _key, signal) => new Promise((resolve) => signal.addEventListener("abort", () => ((aborted = signal.reason), resolve({ error: "aborted" })))));
  expect(await exec.execute(run, { signal: new AbortController().signal, startStep: () => step, resume: () => undefined })).toEqual({ status: "timed_out", error: "agent timeout (50 ms) reached" });
  expect((aborted as Error).name).toBe("TimeoutError");
});

test("a step that ignores the abort does not hold the run past its timeout", async () => {
  const exec = executor(50, () => new Promise(() => {}));
  expect(await exec.execute(run, { signal: new AbortController().signal, startStep: () => step, resume: () => undefined })).toEqual({ status: "timed_out", error: "agent timeout (50 ms) reached" });
});

test("cancelling the run aborts its step with the run's reason", async () => {
  const worker = new AbortController();
  const exec = executor(120_000, (_skill, _tool, _args, _key, signal) => {
    queueMicrotask(() => worker.abort(new Error("run cancelled")));
    return new Promise((resolve) => signal.addEventListener("abort", () => resolve({ error: String((signal.reason as Error).message) })));
  });
  expect(await exec.execute(run, { signal: worker.signal, startStep: () => step, resume: () => undefined })).toEqual({ status: "failed", error: "steps[0] (t): run cancelled" });
});
