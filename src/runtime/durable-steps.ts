// Durable steps (SPEC §6, as Temporal and Inngest do it): a run claimed
// again after its worker was lost resumes after its last completed step.
// Every step an executor starts carries a key, what the step is on any
// attempt; an attempt that finds an outcome recorded under the key reuses it
// (the step is recorded again, resumed from the attempt that executed it,
// and makes no call), and executes the others: a step that was started and
// has no outcome is sent again with its idempotency key (./idempotency-keys.ts).
//
// The keys:
// - a plan step: its idempotency key (run, index, skill, tool);
// - a model agent's tool call: its idempotency key (run, skill, tool,
//   arguments, repeat), counted over replayed calls as over live ones;
// - a model turn: a hash chained over the conversation before it (the
//   run, the first messages, then each turn's reply and tool results), so a
//   recorded reply is replayed only into the conversation it answered.
import type { ChatCompletionMessage, ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { RunStepRecord } from "../store/rows.js";
import { stepHash } from "./idempotency-keys.js";

// A model turn's reply as its step records it, and as a resumed attempt
// replays it.
export interface RecordedReply {
  content: string | null;
  tool_calls?: RecordedToolCall[];
}

export interface RecordedToolCall {
  id: string;
  name: string;
  arguments: string;
}

export function recordedReply(reply: ChatCompletionMessage): RecordedReply {
  const calls = reply.tool_calls?.filter((c) => c.type === "function");
  return { content: reply.content ?? null, tool_calls: calls?.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) };
}

const isText = (v: unknown): v is string => typeof v === "string";

// The reply a recorded result holds; undefined when it holds none (a record
// made before replies recorded their call ids).
export function replyOf(result: unknown): RecordedReply | undefined {
  if (typeof result !== "object" || result === null) return undefined;
  const { content, tool_calls: calls } = result as Record<string, unknown>;
  if (content !== null && !isText(content)) return undefined;
  if (calls === undefined) return { content };
  if (!Array.isArray(calls)) return undefined;
  const ok = calls.every((c: unknown) => {
    const call = c as Record<string, unknown> | null;
    return call !== null && typeof call === "object" && isText(call.id) && isText(call.name) && isText(call.arguments);
  });
  return ok ? { content, tool_calls: calls as RecordedToolCall[] } : undefined;
}

// The assistant message a replayed reply puts back into the conversation.
export function replyMessage(reply: RecordedReply): ChatCompletionMessageParam {
  const calls = reply.tool_calls ?? [];
  return {
    role: "assistant",
    content: reply.content,
    ...(calls.length ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: c.arguments } })) } : {}),
  };
}

// The keys of a model agent's turns, each chained on the one before.
export class TurnKeys {
  #key: string;

  constructor(runId: string, first: ChatCompletionMessageParam[]) {
    this.#key = stepHash(["turn", runId, first]);
  }

  get key(): string {
    return this.#key;
  }

  // The turn answered `reply`, and its tool calls answered `results` (the
  // tool messages' content, in order).
  next(reply: RecordedReply, results: string[]): void {
    this.#key = stepHash(["turn", this.#key, reply, results]);
  }
}

// What a resumed step reuses of its recorded outcome.
export interface RecordedOutcome {
  kind: RunStepRecord["kind"];
  result?: unknown;
  error: string;
}

// Whether an earlier attempt's step is an outcome to reuse: it has a key
// (the recorder drops it when what it recorded is not what the run went on
// with: escaped, or cut to fit the record) and it was executed, not itself
// resumed; it succeeded, or its tool answered with an error (a model agent
// reads that and goes on; a plan agent's run fails with it again). A step
// that failed otherwise (its call gave up, the run ended around it) and one
// still `running` are executed again.
export function reusable(step: RunStepRecord): boolean {
  if (step.key === undefined || step.resumedFromAttempt !== undefined) return false;
  if (step.kind === "model_call") return step.status === "succeeded" && replyOf(step.result) !== undefined;
  return step.status === "succeeded" || (step.status === "failed" && /^tool_error\b/.test(step.error));
}
