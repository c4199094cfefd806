import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import type { Logger } from "pino";
import { ModelError, type ChatModel } from "../integrations/model/chat-model.js";
import type { SecretBox } from "../lib/secret-box.js";
import { agentSecretContext } from "../service/agents.js";
import { expressionErrorKind } from "../service/error-kinds.js";
import { LookupCache } from "../service/lookup-cache.js";
import type { AgentRow, SkillRow } from "../store/rows.js";
import type { ClaimedRun, Store } from "../store/store.js";
import { StoreUnavailableError } from "../store/errors.js";
import { RecordLimitError, type ExecutionContext, type ExecutionResult, type Executor } from "./executor.js";
import type { ToolCaller } from "./tool-calls.js";
import { modelCallKeys, planStepKey } from "./idempotency-keys.js";
import { recordedReply, replyMessage, replyOf, TurnKeys } from "./durable-steps.js";
import { traceStep } from "./run-tracing.js";
import { ATTR } from "../lib/tracing.js";
import type { ExpressionSandbox } from "../integrations/expressions/sandbox.js";
import { NO_OBSERVER, type Observer } from "../lib/observer.js";

export interface AgentExecutorOptions {
  store: Store;
  secrets: SecretBox;
  tools: ToolCaller;
  models: ChatModel;
  log: Logger;
  // Step arguments run in the expression sandbox, each within this budget
  // (and never past the run's own timeout).
  sandbox: ExpressionSandbox;
  stepBudgetMs: number;
  // Told of every model call try (metrics).
  observer?: Observer;
}

class StepFailed extends Error {}

// Agents the executor holds between runs, oldest out first.
const MAX_AGENTS_HELD = 1000;

// What the model reads of a tool call's outcome.
const toolMessage = (outcome: { result?: unknown; error: string }) => (outcome.error ? `error: ${outcome.error}` : JSON.stringify(outcome.result));

// Runs an agent: a deterministic plan of tool calls, or a model loop over the
// tools of its skills. Every call is recorded as a step on the run; a step
// whose outcome an earlier attempt recorded is resumed instead (durable
// steps, ./durable-steps.ts).
export function createAgentExecutor({ store, secrets, tools, models, log, sandbox, stepBudgetMs, observer = NO_OBSERVER }: AgentExecutorOptions): Executor {
  // Agents read for earlier runs (runs starting together share one read).
  // One is used only while the claim says it is current (its update time),
  // so an edited agent is read again at once, and no change signal is
  // waited for.
  const agents = new LookupCache<AgentRow>({ maxEntries: MAX_AGENTS_HELD, maxWeight: MAX_AGENTS_HELD });

  async function agentOf(run: ClaimedRun): Promise<AgentRow | undefined> {
    const read = () => store.agents.get(run.tenantId, run.agentId);
    if (!run.context) return read();
    const current = (agent: AgentRow | undefined) => agent?.updateTime === run.context!.agentUpdateTime;
    const key = `${run.tenantId} ${run.agentId}`;
    const held = agents.peek(key);
    if (held && current(held)) return held;
    agents.delete(key);
    const agent = await agents.load(key, read);
    if (!agent || current(agent)) return agent;
    // A read shared with a run claimed before the edit: read again.
    agents.delete(key);
    return agents.load(key, read);
  }

  async function context(run: ClaimedRun) {
    const event = run.context ? (run.context.event ?? undefined) : run.eventId ? await store.events.get(run.tenantId, run.eventId) : undefined;
    return {
      event: event && { id: event.id, event_type: event.eventType, payload: event.payload, source_id: event.sourceId, receive_time: new Date(event.receiveTime).toISOString() },
      input: run.input ?? undefined,
    };
  }

  async function skillOf(agent: AgentRow, skillId: string): Promise<SkillRow> {
    const skill = await store.skills.get(agent.tenantId, skillId);
    if (!skill) throw new StepFailed(`skill "${skillId}" no longer exists`);
    return skill;
  }

  function allowed(agent: AgentRow, skillId: string, tool: string): boolean {
    const list = agent.spec.allowedTools[skillId];
    return !list || list.length === 0 || list.includes(tool);
  }

  // A step's arguments: an over-budget expression fails the run with
  // `expression_timeout`, one too deep or too large with `expression_limit`.
  // One the machine's load cut off fails it with `expression_timeout` too,
  // its error saying so: a run has no later attempt to wait for.
  async function stepArguments(agent: AgentRow, expression: string, input: unknown, deadline: number, i: number): Promise<unknown> {
    const budget = Math.max(1, Math.min(stepBudgetMs, deadline - Date.now()));
    const [outcome] = await sandbox.evaluate(agent.tenantId, [expression], input, budget, "value");
    if (outcome!.ok) return outcome!.value;
    throw new StepFailed(`steps[${i}].arguments: ${expressionErrorKind(outcome!)}: ${outcome!.message}`);
  }

  async function deterministic(agent: AgentRow, run: ClaimedRun, ctx: ExecutionContext, signal: AbortSignal, deadline: number): Promise<ExecutionResult> {
    const base = await context(run);
    const results: { result: unknown }[] = [];
    let output: unknown = null;
    for (const [i, planned] of agent.spec.steps.entries()) {
      if (!allowed(agent, planned.skillId, planned.tool)) throw new StepFailed(`steps[${i}]: tool "${planned.tool}" is not allowed`);
      const key = planStepKey(run.id, i, planned.skillId, planned.tool);
      const recorded = ctx.resume(key);
      if (recorded) {
        if (recorded.error) throw new StepFailed(`steps[${i}] (${planned.tool}): ${recorded.error}`);
        results.push({ result: recorded.result });
        output = recorded.result;
        continue;
      }
      let args: unknown = {};
      if (planned.arguments.trim()) args = await stepArguments(agent, planned.arguments, { ...base, steps: results }, deadline, i);
      if (typeof args !== "object" || args === null || Array.isArray(args))
        throw new StepFailed(`steps[${i}].arguments must evaluate to an object, got ${JSON.stringify(args)}`);
      const skill = await skillOf(agent, planned.skillId);
      const done = await traceStep("tool_call", i, { [ATTR.skill]: skill.id, [ATTR.tool]: planned.tool }, async () => {
        const step = ctx.startStep({ kind: "tool_call", skillId: skill.id, tool: planned.tool, arguments: args, key });
        const done = await tools.call(skill, planned.tool, args as Record<string, unknown>, key, signal, step);
        return { ...done, result: step.end(done) };
      }, (d) => d.error);
      if (done.error) throw new StepFailed(`steps[${i}] (${planned.tool}): ${done.error}`);
      results.push({ result: done.result });
      output = done.result;
    }
    return { status: "succeeded", output };
  }

  async function model(agent: AgentRow, run: ClaimedRun, ctx: ExecutionContext, signal: AbortSignal): Promise<ExecutionResult> {
    const config = agent.spec.model!;
    const apiKey = agent.modelApiKey ? secrets.open(agent.modelApiKey, agentSecretContext(agent.id)) : "unset";
    const endpoint = { baseUrl: config.baseUrl, apiKey, model: config.model };
    // Tools are offered as `<skill name>__<tool>`, sanitized to what the API accepts.
    const offered = new Map<string, { skill: SkillRow; tool: string }>();
    const definitions: ChatCompletionTool[] = [];
    for (const skillId of agent.spec.skillIds) {
      const skill = await skillOf(agent, skillId);
      for (const tool of skill.tools) {
        if (!allowed(agent, skillId, tool.name)) continue;
        const name = `${skill.name}__${tool.name}`.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
        offered.set(name, { skill, tool: tool.name });
        definitions.push({ type: "function", function: { name, description: tool.description, parameters: tool.inputSchema } });
      }
    }
    const keyOf = modelCallKeys(run.id);
    // The model sees tool failures as text and may recover; the run records them.
    const callForModel = async (name: string, rawArgs: string, turn: number): Promise<string> => {
      const target = offered.get(name);
      if (!target) return `error: unknown tool ${name}`;
      let args: unknown;
      try {
        args = JSON.parse(rawArgs || "{}");
      } catch {
        return "error: arguments are not JSON";
      }
      if (typeof args !== "object" || args === null || Array.isArray(args)) return "error: arguments must be a JSON object";
      const key = keyOf(target.skill.id, target.tool, args as Record<string, unknown>);
      const recorded = ctx.resume(key);
      if (recorded) return toolMessage(recorded);
      const done = await traceStep("tool_call", turn, { [ATTR.skill]: target.skill.id, [ATTR.tool]: target.tool }, async () => {
        const step = ctx.startStep({ kind: "tool_call", skillId: target.skill.id, tool: target.tool, arguments: args, key });
        const done = await tools.call(target.skill, target.tool, args as Record<string, unknown>, key, signal, step);
        return { ...done, result: step.end(done) };
      }, (d) => d.error);
      return toolMessage(done);
    };
    const base = await context(run);
    const messages: ChatCompletionMessageParam[] = [];
    if (agent.instructions) messages.push({ role: "system", content: agent.instructions });
    messages.push({ role: "user", content: JSON.stringify(base.event ?? base.input ?? {}) });

    // A turn whose reply an earlier attempt recorded, in this same
    // conversation, replays it instead of asking the model again.
    const turns = new TurnKeys(run.id, messages);
    for (let turn = 0; turn < agent.maxSteps; turn++) {
      const key = turns.key;
      let reply = replyOf(ctx.resume(key)?.result);
      if (reply) messages.push(replyMessage(reply));
      else {
        const step = ctx.startStep({ kind: "model_call", skillId: "", tool: config.model, arguments: { messages: messages.length, tools: definitions.length }, key });
        let answer;
        try {
          answer = await traceStep("model_call", turn, {}, () =>
            models.complete(endpoint, { messages, tools: definitions }, signal, step, (outcome, seconds, tokens) =>
              observer.modelCall(agent.tenantId, outcome, seconds, tokens),
            ),
          );
        } catch (err) {
          const error = err instanceof ModelError ? err.message : `model_error: ${(err as Error).message}`;
          step.end({ error });
          if (signal.aborted) throw err;
          throw new StepFailed(error);
        }
        reply = recordedReply(answer);
        step.end({ result: reply, error: "" });
        messages.push(answer as ChatCompletionMessageParam);
      }
      const calls = reply.tool_calls ?? [];
      if (calls.length === 0) return { status: "succeeded", output: reply.content };
      const results: string[] = [];
      for (const call of calls) {
        results.push(await callForModel(call.name, call.arguments, turn));
        messages.push({ role: "tool", tool_call_id: call.id, content: results.at(-1)! });
      }
      turns.next(reply, results);
    }
    throw new StepFailed(`max_steps (${agent.maxSteps}) reached without a final answer`);
  }

  return {
    async execute(run, ctx) {
      const agent = await agentOf(run);
      if (!agent) return { status: "failed", error: `agent "${run.agentId}" no longer exists` };
      // The run's own signal: aborted by its timeout or by ctx.signal. SDKs
      // attach listeners to it and never detach them, so nothing may keep it
      // alive once the run is over: its timer is cleared and its link to
      // ctx.signal removed (AbortSignal.timeout/any would each hold it until
      // the timeout, with every call of the run).
      const controller = new AbortController();
      const cancelled = () => controller.abort(ctx.signal.reason);
      let timedOutReason: unknown;
      let timeOut!: (reason: unknown) => void;
      // The timeout ends the run even if a step ignores the abort signal.
      const timedOut = new Promise<never>((_, reject) => (timeOut = reject));
      timedOut.catch(() => {});
      const timer = setTimeout(() => {
        timedOutReason = new DOMException("The operation was aborted due to timeout", "TimeoutError");
        controller.abort(timedOutReason);
        timeOut(timedOutReason);
      }, agent.timeoutMs);
      timer.unref();
      if (ctx.signal.aborted) cancelled();
      else ctx.signal.addEventListener("abort", cancelled, { once: true });
      const signal = controller.signal;
      const ends = Date.now() + agent.timeoutMs;
      try {
        return await Promise.race([agent.spec.model ? model(agent, run, ctx, signal) : deterministic(agent, run, ctx, signal, ends), timedOut]);
      } catch (err) {
        if (timedOutReason !== undefined) return { status: "timed_out", error: `agent timeout (${agent.timeoutMs} ms) reached` };
        if (err instanceof StepFailed || err instanceof RecordLimitError) return { status: "failed", error: err.message };
        // The store failed (a database outage), not the run: the worker gives it back.
        if (err instanceof StoreUnavailableError) throw err;
        if (!ctx.signal.aborted) log.error({ err, run: run.id }, "agent execution failed");
        return { status: "failed", error: (err as Error).message };
      } finally {
        clearTimeout(timer);
        ctx.signal.removeEventListener("abort", cancelled);
      }
    },
  };
}
