import { fromJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import type { FastifyError, FastifyInstance, FastifyReply } from "fastify";
import { bodyRefusal, type BodyRefusal } from "../http/errors.js";

// JSON-RPC 2.0 error codes (§5.1) the endpoint answers itself; -32000 is the
// implementation-defined "Unauthorized" the MCP SDK's servers also use.
export const JSON_RPC = { parseError: -32700, invalidRequest: -32600, invalidParams: -32602, internalError: -32603, unauthorized: -32000 };

export function jsonRpcError(reply: FastifyReply, status: number, message: string, code: number = JSON_RPC.invalidRequest, id: unknown = null) {
  return reply.status(status).type("application/json").send({ jsonrpc: "2.0", id, error: { code, message } });
}

class ParseError extends Error {}

// Bodies the MCP SDK never sees still get a JSON-RPC answer, with the HTTP
// status kept: a client library reads `error.code`, a proxy the status. The
// parser and handler are this plugin's own (fastify encapsulation), so the
// other surfaces keep their error shapes.
export function jsonRpcBodies(app: FastifyInstance): void {
  const limit = app.initialConfig.bodyLimit ?? 1024 * 1024;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_req, body, done) => {
    if (body === "") return done(null, undefined);
    try {
      done(null, JSON.parse(body as string));
    } catch {
      done(new ParseError("body is not valid JSON"));
    }
  });
  const refusals: Record<BodyRefusal["kind"], string> = {
    too_large: `the body is larger than ${limit} bytes`,
    media_type: "Content-Type must be application/json",
    length: "Content-Length does not match the body",
    empty: "the body is empty",
    malformed: "the body cannot be read",
  };
  app.setErrorHandler((err: FastifyError, _req, reply) => {
    if (err instanceof ParseError) return jsonRpcError(reply, 400, `Parse error: ${err.message}`, JSON_RPC.parseError);
    const refused = bodyRefusal(err);
    if (refused) return jsonRpcError(reply, refused.status, `Invalid Request: ${refusals[refused.kind]}`);
    app.log.error({ err }, "MCP request failed");
    return jsonRpcError(reply, 500, "Internal error", JSON_RPC.internalError);
  });
}

interface CallParams {
  name?: unknown;
  arguments?: unknown;
  _meta?: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

// The arguments as the operation's request message, or why they are not one,
// briefly: "cannot decode field platform.v1.X.page_size from JSON: …" names
// the field by its full name, while the caller knows it as an argument.
export function decodeArguments<T extends DescMessage>(input: T, args: unknown): { request: MessageShape<T> } | { reason: string } {
  try {
    return { request: fromJson(input, (args ?? {}) as JsonValue) };
  } catch (err) {
    const text = (err as Error).message;
    const m = /^cannot decode (?:message [\w.]+|field [\w.]+\.(\w+)) from JSON: ([\s\S]*)$/.exec(text);
    return { reason: `${m?.[1] ? `arguments.${m[1]}` : "arguments"}: ${(m?.[2] ?? text).slice(0, 200)}` };
  }
}

// MCP 2025-11-25 (SEP-1303) reports arguments that do not fit a tool's input
// as a tool execution error, which a model can read and correct; earlier
// revisions list them as a protocol error (-32602). A stateless endpoint
// knows the revision from each request's header, absent meaning 2025-03-26.
const argumentErrorsAreToolErrors = (protocolVersion: string | undefined) => (protocolVersion ?? "") >= "2025-11-25";

// What is wrong with a `tools/call`'s params, said briefly, before the SDK's
// schema check would answer -32603 with a whole validation dump: the
// request's shape, the tool's name, and (unless they are tool errors in this
// revision) whether the arguments decode into the operation's request.
export function invalidCallParams(
  params: unknown,
  toolInput: (name: string) => DescMessage | undefined,
  protocolVersion: string | undefined,
): string | undefined {
  if (!isObject(params)) return "params must be an object";
  const { name, arguments: args, _meta } = params as CallParams;
  if (typeof name !== "string") return "params.name must be a string";
  if (args !== undefined && !isObject(args)) return "arguments must be an object";
  if (_meta !== undefined && !isObject(_meta)) return "params._meta must be an object";
  const input = toolInput(name);
  if (!input) return `unknown tool "${name.slice(0, 100)}"`;
  if (argumentErrorsAreToolErrors(protocolVersion)) return undefined;
  const decoded = decodeArguments(input, args);
  return "reason" in decoded ? decoded.reason : undefined;
}
