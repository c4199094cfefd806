import http from "node:http";
import http2 from "node:http2";
import type { Socket } from "node:net";
import type { FastifyServerFactory } from "fastify";
import type { HttpLimits } from "./http-limits.js";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
// The usual gRPC server default: each HTTP/2 stream may hold a request body of
// up to the body limit, so one connection must not open unboundedly many.
const MAX_CONCURRENT_STREAMS = 100;

// A response that starts before its request has been received entirely (an
// early refusal: bad token, rate limit, body too large) closes the
// connection after it, instead of Node reading and discarding the rest of a
// body the sender may trickle for as long as it likes.
class ClosingWhenUnreadResponse extends http.ServerResponse {
  override writeHead(...args: unknown[]): this {
    if (!this.req.complete) this.shouldKeepAlive = false;
    return (super.writeHead as (...a: unknown[]) => this)(...args); // forwards every overload unchanged
  }
}

// RFC 9113 §6.5.2: each field counts its name, its value and 32 octets.
function headerListSize(rawHeaders: string[]): number {
  let size = 0;
  for (const field of rawHeaders) size += Buffer.byteLength(field);
  return size + (rawHeaders.length / 2) * 32;
}

function refuseLargeHeaders(res: http2.Http2ServerResponse, limit: number): void {
  const body = JSON.stringify({ code: "resource_exhausted", message: `request headers are larger than the limit of ${limit} bytes` });
  res.writeHead(431, { "content-type": "application/json" }).end(body);
}

// One port for HTTP/1.1 (REST, webhooks, Connect, gRPC-Web) and cleartext
// HTTP/2 with prior knowledge (gRPC): each new connection is sniffed for the
// HTTP/2 preface and handed to the matching Node server. Node offers
// `allowHTTP1` only with TLS, where ALPN decides. Every connection is accepted
// by the HTTP/1.1 server, so its `maxConnections` counts both kinds.
export function h2cServerFactory(limits: HttpLimits): FastifyServerFactory {
  return (handler) => {
    const h1 = http.createServer(
      {
        ServerResponse: ClosingWhenUnreadResponse,
        maxHeaderSize: limits.maxHeaderBytes,
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.idleTimeoutMs,
        // Node checks the two timeouts above only this often (30 s by default).
        connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
      },
      handler,
    );
    h1.maxConnections = limits.maxConnections;
    const h2Handler = handler as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void; // Fastify's handler takes either request kind
    const h2 = http2.createServer(
      { settings: { maxHeaderListSize: limits.maxHeaderBytes, maxConcurrentStreams: MAX_CONCURRENT_STREAMS } },
      (req, res) => {
        // The advertised setting binds only once the client has acknowledged
        // it, which its first requests need not wait for.
        if (headerListSize(req.rawHeaders) > limits.maxHeaderBytes) return refuseLargeHeaders(res, limits.maxHeaderBytes);
        h2Handler(req, res);
      },
    );
    const sessions = new Set<http2.ServerHttp2Session>();
    const sniffing = new Set<Socket>();
    let closing = false;

    h2.on("session", (session) => {
      sessions.add(session);
      session.once("close", () => sessions.delete(session));
      // `close` lets open streams finish; only an idle session goes away.
      session.setTimeout(limits.idleTimeoutMs, () => session.close());
      if (closing) session.close();
    });
    h2.on("stream", (stream) => {
      // The peer has sent END_STREAM: the request is in, whether read or not.
      const received = () => stream.destroyed || stream.state.remoteClose === 1;
      const timer = setTimeout(() => {
        if (!received()) stream.close(http2.constants.NGHTTP2_CANCEL);
      }, limits.requestTimeoutMs);
      stream.once("close", () => clearTimeout(timer));
      // A response sent before its request was read to the end (an early
      // refusal, a body over the limit) ends the stream, as HTTP/1.1 closes
      // the connection: RST_STREAM with NO_ERROR while the peer still sends
      // (RFC 9113 §8.1), and either way the unread rest is dropped. Node does
      // this itself only when the handler read none of the body; otherwise
      // the stream, and so its session, would stay open for good. Trailers
      // (gRPC's status) go out after `finish`, in a later tick: wait for them.
      const release = () =>
        setImmediate(() => {
          if (!stream.destroyed && !stream.readableEnded) stream.destroy();
        });
      stream.once("finish", () =>
        setImmediate(() => {
          if (stream.sentTrailers !== undefined || stream.state.localClose === 1) release();
          else stream.once("wantTrailers", release);
        }),
      );
    });

    const h1Listeners = h1.listeners("connection") as ((socket: Socket) => void)[];
    h1.removeAllListeners("connection");
    h1.on("connection", (socket: Socket) => {
      let seen = Buffer.alloc(0);
      const onError = () => socket.destroy();
      // Sniffing is the start of the first request's headers: same deadline,
      // from the connection's start (a byte now and then does not extend it).
      const deadline = setTimeout(() => socket.destroy(), limits.headersTimeoutMs);
      const dispatch = (isH2: boolean) => {
        sniffing.delete(socket);
        clearTimeout(deadline);
        socket.off("data", onData).off("error", onError);
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
      socket.once("close", () => {
        sniffing.delete(socket);
        clearTimeout(deadline);
      });
      socket.on("error", onError).on("data", onData);
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
}
