// A scripted OpenAI-compatible Chat Completions endpoint on 127.0.0.1, for
// tests of code that talks to a model through the `openai` client with
// `new OpenAI({ baseURL: server.baseUrl, ... })`.
//
// Each accepted POST /v1/chat/completions is recorded and answered with the
// next scripted reply (array script), or with whatever the script function
// returns for it. Only non-streaming requests are supported.
//
// Invariant: requests()[i], authorizations()[i] and the script's reply i all
// belong to the same request. Requests rejected before reaching the script
// (wrong method or path, unparseable JSON, no `messages` array, stream: true)
// are answered with an OpenAI-style 4xx error and are neither recorded nor
// given a script entry.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { listenOnLoopback } from "./listen.js";

/** Token counts reported in `usage`; omitted fields are estimated (about 4 characters per token). */
export interface ScriptedUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

export type ScriptedReply =
  /**
   * An assistant message with tool_calls, finish_reason "tool_calls". Call ids are
   * generated per server: call_1, call_2, ... (unique across the whole conversation).
   * `arguments` is sent JSON-encoded; a string is sent as-is (so a test can send
   * malformed argument JSON). `content` defaults to null.
   */
  | { toolCalls: { name: string; arguments: unknown }[]; content?: string; usage?: ScriptedUsage }
  /** A final assistant message, finish_reason "stop". */
  | { content: string; usage?: ScriptedUsage }
  /**
   * An HTTP error. `body` is sent as JSON (a string is sent as-is); the default is
   * an OpenAI-style `{ error: { message, type, code } }`. `headers` are added to the
   * response, e.g. { "retry-after-ms": "0" } to make the openai client retry at once,
   * or { "x-should-retry": "false" }.
   */
  | { status: number; body?: unknown; headers?: Record<string, string> };

export interface ChatMessage {
  role: string;
  content?: unknown;
  name?: string;
  tool_calls?: unknown;
  tool_call_id?: string;
  [key: string]: unknown;
}

export interface ChatTool {
  type: string;
  function: { name: string; description?: string; parameters?: unknown; strict?: boolean | null };
}

/** A request body as received (parsed JSON; only `messages` being an array is checked). */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ChatTool[];
  tool_choice?: unknown;
  stream?: boolean | null;
  [key: string]: unknown;
}

export type ModelScript =
  | ScriptedReply[]
  /** index: 0-based position of the request among accepted requests (= its index in requests()). May be async. */
  | ((request: ChatRequest, index: number) => ScriptedReply | Promise<ScriptedReply>);

export interface ModelServer {
  /** e.g. http://127.0.0.1:PORT/v1 — what OpenAI({ baseURL }) takes. */
  baseUrl: string;
  /** Every accepted POST /v1/chat/completions body, parsed, in arrival order. */
  requests(): ChatRequest[];
  /** The Authorization header of each accepted request ("" when absent), aligned with requests(). */
  authorizations(): string[];
  /** The `traceparent` header of each accepted request ("" when absent), aligned with requests(). */
  traceparents(): string[];
  close(): Promise<void>;
}

const PATH = "/v1/chat/completions";

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  res.writeHead(status, { ...headers, "content-type": "application/json" }).end(text);
}

function errorBody(message: string, type: string, code: string | null = null): { error: Record<string, unknown> } {
  return { error: { message, type, param: null, code } };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

function defaultErrorBody(status: number): unknown {
  if (status === 401) return errorBody("Incorrect API key provided (scripted).", "invalid_request_error", "invalid_api_key");
  if (status === 429) return errorBody("Rate limit reached (scripted).", "requests", "rate_limit_exceeded");
  if (status >= 500) return errorBody(`Scripted server error ${status}.`, "server_error");
  return errorBody(`Scripted error ${status}.`, "invalid_request_error");
}

export async function startModelServer(script: ModelScript): Promise<ModelServer> {
  const received: ChatRequest[] = [];
  const auths: string[] = [];
  const traceparents: string[] = [];
  let nextCallId = 1;
  let nextCompletionId = 1;

  type Failure = { failure: string; code: string };
  async function replyFor(request: ChatRequest, index: number): Promise<ScriptedReply | Failure> {
    if (Array.isArray(script)) {
      return (
        script[index] ?? {
          failure: `model-server: script exhausted: no reply scripted for request #${index + 1} (${script.length} scripted)`,
          code: "script_exhausted",
        }
      );
    }
    try {
      return await script(request, index);
    } catch (err) {
      return {
        failure: `model-server: script function threw for request #${index + 1}: ${err instanceof Error ? err.message : String(err)}`,
        code: "script_threw",
      };
    }
  }

  function completion(request: ChatRequest, reply: Exclude<ScriptedReply, { status: number }>): unknown {
    const toolCalls =
      "toolCalls" in reply
        ? reply.toolCalls.map((call) => ({
            id: `call_${nextCallId++}`,
            type: "function",
            function: {
              name: call.name,
              arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {}),
            },
          }))
        : undefined;
    const content = reply.content ?? null;
    const completionText = (content ?? "") + (toolCalls ? JSON.stringify(toolCalls) : "");
    const prompt_tokens = reply.usage?.prompt_tokens ?? estimateTokens(JSON.stringify(request.messages));
    const completion_tokens = reply.usage?.completion_tokens ?? estimateTokens(completionText);
    return {
      id: `chatcmpl-scripted-${nextCompletionId++}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: request.model,
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content,
            refusal: null,
            ...(toolCalls ? { tool_calls: toolCalls } : {}),
          },
          logprobs: null,
          finish_reason: toolCalls ? "tool_calls" : "stop",
        },
      ],
      usage: { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens },
    };
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "").split("?")[0];
    if (path !== PATH) {
      sendJson(res, 404, errorBody(`model-server: unknown path ${req.method} ${req.url}`, "invalid_request_error"));
      return;
    }
    if (req.method !== "POST") {
      sendJson(res, 405, errorBody(`model-server: method ${req.method} not allowed`, "invalid_request_error"));
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readBody(req));
    } catch {
      sendJson(res, 400, errorBody("model-server: request body is not valid JSON", "invalid_request_error"));
      return;
    }
    if (!isRecord(parsed) || !Array.isArray(parsed.messages)) {
      sendJson(res, 400, errorBody("model-server: request body needs a `messages` array", "invalid_request_error"));
      return;
    }
    if (parsed.stream === true) {
      sendJson(res, 400, errorBody("model-server: stream: true is not supported", "invalid_request_error"));
      return;
    }
    const request = parsed as ChatRequest;
    const index = received.length;
    received.push(request);
    const auth = req.headers.authorization;
    auths.push(typeof auth === "string" ? auth : "");
    traceparents.push(String(req.headers.traceparent ?? ""));

    const reply = await replyFor(request, index);
    if ("failure" in reply) {
      sendJson(res, 500, errorBody(reply.failure, "server_error", reply.code));
      return;
    }
    if ("status" in reply) {
      sendJson(res, reply.status, reply.body === undefined ? defaultErrorBody(reply.status) : reply.body, reply.headers);
      return;
    }
    sendJson(res, 200, completion(request, reply));
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        sendJson(res, 500, errorBody(`model-server: ${err instanceof Error ? err.message : String(err)}`, "server_error"));
      } else {
        res.destroy();
      }
    });
  });
  const port = await listenOnLoopback(server);
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests: () => [...received],
    authorizations: () => [...auths],
    traceparents: () => [...traceparents],
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
