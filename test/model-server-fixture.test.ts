// Self-check of test/support/model-server.ts against the real `openai` client.
import OpenAI, { APIError } from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { startModelServer, type ModelServer } from "./support/model-server.js";

const tools: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather for a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

let server: ModelServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

function client(s: ModelServer, apiKey = "sk-test", maxRetries = 0): OpenAI {
  return new OpenAI({ baseURL: s.baseUrl, apiKey, maxRetries });
}

test("a tool-call reply, then a final reply; requests and authorizations are recorded", async () => {
  server = await startModelServer([
    { toolCalls: [{ name: "get_weather", arguments: { city: "Oslo" } }] },
    { content: "It is sunny in Oslo." },
  ]);
  const openai = client(server);

  const messages: ChatCompletionMessageParam[] = [
    { role: "system", content: "You are helpful." },
    { role: "user", content: "Weather in Oslo?" },
  ];
  const first = await openai.chat.completions.create({ model: "test-model", messages, tools });
  expect(first.object).toBe("chat.completion");
  expect(first.model).toBe("test-model");
  const choice = first.choices[0];
  expect(choice?.finish_reason).toBe("tool_calls");
  expect(choice?.message.content).toBeNull();
  const call = choice?.message.tool_calls?.[0];
  expect(call).toEqual({ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } });
  expect(first.usage?.total_tokens).toBe((first.usage?.prompt_tokens ?? 0) + (first.usage?.completion_tokens ?? 0));

  if (!choice) throw new Error("no choice");
  messages.push(choice.message as ChatCompletionMessageParam);
  messages.push({ role: "tool", tool_call_id: "call_1", content: '{"sky":"clear"}' });
  const second = await openai.chat.completions.create({ model: "test-model", messages, tools });
  expect(second.choices[0]?.finish_reason).toBe("stop");
  expect(second.choices[0]?.message).toMatchObject({ role: "assistant", content: "It is sunny in Oslo." });
  expect(second.choices[0]?.message.tool_calls).toBeUndefined();

  const requests = server.requests();
  expect(requests).toHaveLength(2);
  expect(requests[0]?.model).toBe("test-model");
  expect(requests[0]?.messages).toEqual([
    { role: "system", content: "You are helpful." },
    { role: "user", content: "Weather in Oslo?" },
  ]);
  expect(requests[0]?.tools).toEqual(tools);
  expect(requests[1]?.messages).toHaveLength(4);
  expect(requests[1]?.messages[2]).toMatchObject({ role: "assistant", tool_calls: [{ id: "call_1" }] });
  expect(requests[1]?.messages[3]).toEqual({ role: "tool", tool_call_id: "call_1", content: '{"sky":"clear"}' });
  expect(server.authorizations()).toEqual(["Bearer sk-test", "Bearer sk-test"]);
});

test("an HTTP 500 reply surfaces as an APIError with status 500", async () => {
  server = await startModelServer([{ status: 500 }]);
  const err = await client(server)
    .chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(APIError);
  expect((err as APIError).status).toBe(500);
  expect(server.requests()).toHaveLength(1);
});

test("HTTP errors with custom bodies and headers; retries consume script entries", async () => {
  server = await startModelServer([
    { status: 429, headers: { "retry-after-ms": "0" } },
    { status: 401, body: { error: { message: "bad key", type: "invalid_request_error", code: "invalid_api_key" } } },
    { status: 500, headers: { "retry-after-ms": "0" } },
    { content: "recovered" },
  ]);
  const openai = client(server, "sk-other", 0);
  const rate = await openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "a" }] }).catch((e: unknown) => e);
  expect(rate).toBeInstanceOf(OpenAI.RateLimitError);
  const auth = await openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "b" }] }).catch((e: unknown) => e);
  expect(auth).toBeInstanceOf(OpenAI.AuthenticationError);
  expect((auth as APIError).code).toBe("invalid_api_key");
  expect((auth as APIError).message).toContain("bad key");

  // With retries enabled, the 500 is retried and the next scripted reply is served.
  const retried = await client(server, "sk-other", 2).chat.completions.create({
    model: "m",
    messages: [{ role: "user", content: "c" }],
  });
  expect(retried.choices[0]?.message.content).toBe("recovered");
  expect(server.requests()).toHaveLength(4);
  expect(server.authorizations()).toEqual(Array(4).fill("Bearer sk-other"));
});

test("running out of script answers 500 saying so; stream: true answers 400", async () => {
  server = await startModelServer([{ content: "only one" }]);
  const openai = client(server);
  await openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "1" }] });
  const exhausted = await openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "2" }] }).catch((e: unknown) => e);
  expect(exhausted).toBeInstanceOf(APIError);
  expect((exhausted as APIError).status).toBe(500);
  expect((exhausted as APIError).message).toMatch(/script exhausted/);

  const streamed = await openai.chat.completions
    .create({ model: "m", messages: [{ role: "user", content: "3" }], stream: true })
    .catch((e: unknown) => e);
  expect(streamed).toBeInstanceOf(OpenAI.BadRequestError);
  expect(server.requests()).toHaveLength(2); // the rejected stream request is not recorded
});

test("a script function sees each request and its index; tool call ids keep counting", async () => {
  server = await startModelServer((request, index) =>
    index === 0
      ? { toolCalls: [{ name: "a", arguments: {} }, { name: "b", arguments: "{not json" }] }
      : index === 1
        ? { toolCalls: [{ name: "c", arguments: { n: 1 } }], content: "thinking" }
        : { content: `echo ${String(request.messages.at(-1)?.content)}`, usage: { prompt_tokens: 7, completion_tokens: 3 } },
  );
  const openai = client(server);
  const ask = (content: string) => openai.chat.completions.create({ model: "m", messages: [{ role: "user", content }] });
  const r0 = await ask("x");
  expect(r0.choices[0]?.message.tool_calls?.map((c) => c.id)).toEqual(["call_1", "call_2"]);
  const second = r0.choices[0]?.message.tool_calls?.[1];
  expect(second?.type === "function" ? second.function.arguments : undefined).toBe("{not json");
  const r1 = await ask("y");
  expect(r1.choices[0]?.message.tool_calls?.[0]?.id).toBe("call_3");
  expect(r1.choices[0]?.message.content).toBe("thinking");
  const r2 = await ask("z");
  expect(r2.choices[0]?.message.content).toBe("echo z");
  expect(r2.usage).toEqual({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
});
