import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { Platform } from "../service/platform.js";
import { callerFromHeaders } from "./caller.js";

// Errors that are not ConnectErrors are bugs or infrastructure failures: log
// them, and answer `internal` without their detail.
function hideInternalErrors(log: FastifyBaseLogger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      log.error({ err, procedure: req.url }, "unhandled error");
      throw new ConnectError("internal error", Code.Internal);
    }
  };
}

// Every PlatformService method, generated-code-first: each handler hands the
// request message and the caller's headers to the platform. The message is
// read before the caller is authenticated, so `readMaxBytes` bounds it (each
// message of every protocol, compressed and decompressed); past it the caller
// gets `resource_exhausted` and the connection closes.
export async function connectSurface(app: FastifyInstance, opts: { platform: Platform; readMaxBytes: number }): Promise<void> {
  const { platform } = opts;
  const impl: Record<string, (req: unknown, ctx: { requestHeader: Headers }) => Promise<unknown>> = {};
  for (const method of (platform.service.methods as DescMethod[]).filter((m) => m.methodKind === "unary"))
    impl[method.localName] = (req, ctx) =>
      platform.invoke(method, req, callerFromHeaders((name) => ctx.requestHeader.get(name)), "api");
  await app.register(fastifyConnectPlugin, {
    routes: (router: ConnectRouter) => {
      router.service(platform.service, impl as never); // `impl` is keyed by the descriptor's own method names
    },
    interceptors: [hideInternalErrors(app.log)],
    readMaxBytes: opts.readMaxBytes,
  });
}
