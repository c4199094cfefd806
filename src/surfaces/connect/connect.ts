import type { DescMethod } from "@bufbuild/protobuf";
import { createContextKey, createContextValues, type ConnectRouter, type ContextValues, type Interceptor } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from "fastify";
import type { Platform } from "../../service/platform.js";
import { callerFromHeaders } from "../http/caller.js";
import { asServiceError } from "../http/errors.js";

// Errors that are not ConnectErrors are bugs or infrastructure failures: log
// them, and answer `internal` without their detail.
// A stream's error comes while its messages are read, after the handler
// returned: reading them is wrapped the same way.
function hideInternalErrors(log: FastifyBaseLogger): Interceptor {
  const hide = (err: unknown, url: string) => {
    const answered = asServiceError(err);
    if (answered !== err) log.error({ err, procedure: url }, "unhandled error");
    return answered;
  };
  return (next) => async (req) => {
    let res;
    try {
      res = await next(req);
    } catch (err) {
      throw hide(err, req.url);
    }
    if (!res.stream) return res;
    const messages = res.message[Symbol.asyncIterator]();
    return {
      ...res,
      message: (async function* () {
        try {
          for (;;) {
            let next;
            try {
              next = await messages.next();
            } catch (err) {
              throw hide(err, req.url);
            }
            if (next.done) return;
            // A write error thrown in here (the client went away) is Connect's
            // own and goes back as it came; the handler is closed below.
            yield next.value;
          }
        } finally {
          await messages.return?.();
        }
      })(),
    };
  };
}

// The request a call came in, for its access log line.
const FASTIFY_REQUEST = createContextKey<FastifyRequest | undefined>(undefined);

// Every PlatformService method, generated-code-first: each handler hands the
// request message and the caller's headers to the platform (a server stream
// also its abort signal). The message is
// read before the caller is authenticated, so `readMaxBytes` bounds it (each
// message of every protocol, compressed and decompressed); past it the caller
// gets `resource_exhausted` and the connection closes.
export async function connectSurface(app: FastifyInstance, opts: { platform: Platform; readMaxBytes: number }): Promise<void> {
  const { platform } = opts;
  type Context = { requestHeader: Headers; signal: AbortSignal; values: ContextValues };
  const impl: Record<string, (req: unknown, ctx: Context) => Promise<unknown> | AsyncIterable<unknown>> = {};
  for (const method of platform.service.methods as DescMethod[]) {
    const caller = (ctx: Context) => callerFromHeaders((name) => ctx.requestHeader.get(name), undefined, ctx.values.get(FASTIFY_REQUEST));
    // Server streams (Watch…): `ctx.signal` aborts when the caller goes away.
    impl[method.localName] =
      method.methodKind === "unary"
        ? (req, ctx) => platform.invoke(method, req, caller(ctx), "api")
        : (req, ctx) => platform.stream(method, req, caller(ctx), ctx.signal);
  }
  await app.register(fastifyConnectPlugin, {
    routes: (router: ConnectRouter) => {
      router.service(platform.service, impl as never); // `impl` is keyed by the descriptor's own method names
    },
    interceptors: [hideInternalErrors(app.log)],
    contextValues: (req) => createContextValues().set(FASTIFY_REQUEST, req),
    readMaxBytes: opts.readMaxBytes,
  });
}
