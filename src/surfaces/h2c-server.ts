import http from "node:http";
import http2 from "node:http2";
import type { Socket } from "node:net";
import type { FastifyServerFactory } from "fastify";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const SNIFF_TIMEOUT_MS = 10_000;

// One port for HTTP/1.1 (REST, webhooks, Connect, gRPC-Web) and cleartext
// HTTP/2 with prior knowledge (gRPC): each new connection is sniffed for the
// HTTP/2 preface and handed to the matching Node server. Node offers
// `allowHTTP1` only with TLS, where ALPN decides.
export const h2cServerFactory: FastifyServerFactory = (handler, opts) => {
  const h1 = http.createServer(handler);
  // Fastify does not apply these itself when given a server factory.
  if (typeof opts.keepAliveTimeout === "number") h1.keepAliveTimeout = opts.keepAliveTimeout;
  if (typeof opts.requestTimeout === "number") h1.requestTimeout = opts.requestTimeout;
  const h2 = http2.createServer({}, handler as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void); // Fastify's handler takes either request kind
  const sessions = new Set<http2.ServerHttp2Session>();
  const sniffing = new Set<Socket>();
  let closing = false;

  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    session.setTimeout(typeof opts.http2SessionTimeout === "number" ? opts.http2SessionTimeout : 72_000, () => session.close());
    if (closing) session.close();
  });

  const h1Listeners = h1.listeners("connection") as ((socket: Socket) => void)[];
  h1.removeAllListeners("connection");
  h1.on("connection", (socket: Socket) => {
    let seen = Buffer.alloc(0);
    const onError = () => socket.destroy();
    const dispatch = (isH2: boolean) => {
      sniffing.delete(socket);
      socket.off("data", onData).off("error", onError).setTimeout(0);
      socket.pause();
      socket.unshift(seen);
      if (isH2) {
        // http2 reads the unshifted bytes itself; resuming here would lose them.
        h2.emit("connection", socket);
      } else {
        for (const listener of h1Listeners) listener.call(h1, socket);
        socket.resume();
      }
    };
    const onData = (chunk: Buffer) => {
      seen = Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, PREFACE.length);
      if (!seen.subarray(0, n).equals(PREFACE.subarray(0, n))) dispatch(false);
      else if (seen.length >= PREFACE.length) dispatch(true);
    };
    sniffing.add(socket);
    socket.once("close", () => sniffing.delete(socket));
    socket.on("error", onError).on("data", onData).setTimeout(SNIFF_TIMEOUT_MS, () => socket.destroy());
  });

  const closeHttp2 = () => {
    if (closing) return;
    closing = true;
    for (const socket of sniffing) socket.destroy();
    for (const session of sessions) session.close();
  };
  // Fastify calls `closeHttp2Sessions` on close when the server has it.
  Object.assign(h1, { closeHttp2Sessions: closeHttp2 });
  const close = h1.close.bind(h1);
  h1.close = (callback?: (err?: Error) => void) => {
    closeHttp2();
    return close(callback);
  };
  return h1;
};
