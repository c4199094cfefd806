// The request rewriter of `run.js tenants` (the paced generator's `rewrite`):
// each request goes to the next tenant's source in turn (its whk_ token),
// with a new Idempotency-Key. CommonJS, because the generator's process and
// the bench's preflight load it with require(); the tokens come from the
// environment (BENCH_TOKENS, comma-separated), read at each request, since
// one process may load several targets in turn.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS module (see above)
import crypto = require("node:crypto");

interface LoadRequest {
  headers?: Record<string, string>;
  body?: string | Buffer;
}

let cached = { list: "", tokens: [] as string[] };
let next = 0;

function rotate(request: LoadRequest): LoadRequest {
  const list = process.env.BENCH_TOKENS ?? "";
  if (list !== cached.list) cached = { list, tokens: list.split(",") };
  const token = cached.tokens[next++ % cached.tokens.length]!;
  request.headers = { ...request.headers, "x-webhook-token": token, "idempotency-key": crypto.randomUUID() };
  return request;
}

export = rotate;
