// The request rewriter of `run.js signed` (the paced generator's `rewrite`):
// signs every request as a Standard Webhooks sender does, with a new
// webhook-id (so each is a new event) and the current time. CommonJS, because
// the generator's process and the bench's preflight load it with require();
// the key comes from the environment the generator's process inherits.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS module (see above)
import crypto = require("node:crypto");

const key = Buffer.from(process.env.BENCH_STANDARD_WEBHOOKS_KEY ?? "", "base64");

interface LoadRequest {
  headers?: Record<string, string>;
  body?: string | Buffer;
}

function sign(request: LoadRequest): LoadRequest {
  const id = `msg_${crypto.randomUUID()}`;
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = crypto
    .createHmac("sha256", key)
    .update(`${id}.${timestamp}.`)
    .update(request.body ?? "")
    .digest("base64");
  request.headers = { ...request.headers, "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": `v1,${signature}` };
  return request;
}

export = sign;
