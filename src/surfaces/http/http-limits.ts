import type { Socket } from "node:net";
import { STATUS_CODES } from "node:http";

// Limits every surface shares, applied where connections and requests are
// received, before any authentication: a caller that is never authenticated
// must not be able to hold memory, sockets or file descriptors for long.
export interface HttpLimits {
  // Largest request body of Connect (each message, every protocol), REST and
  // MCP. Webhooks have their own limit.
  maxBodyBytes: number;
  // Largest request header block: HTTP/1.1 headers, HTTP/2 header list.
  maxHeaderBytes: number;
  // Time from the connection's first byte (or the end of the previous request)
  // to the end of the request headers; also the time a new connection has to
  // show whether it speaks HTTP/1.1 or HTTP/2.
  headersTimeoutMs: number;
  // Time to receive a whole request, headers and body. Once the body is in,
  // the response may take as long as it needs (streams).
  requestTimeoutMs: number;
  // An HTTP/1.1 keep-alive connection or an HTTP/2 session with nothing to do
  // is closed after this.
  idleTimeoutMs: number;
  // Open connections, HTTP/1.1 and HTTP/2 together; past it new ones are
  // closed at once.
  maxConnections: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  maxBodyBytes: 1024 * 1024,
  maxHeaderBytes: 16 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  // Longer than the 60 s idle timeout of common load balancers, so that they
  // never reuse a connection this side is closing.
  idleTimeoutMs: 72_000,
  maxConnections: 10_000,
};

// Node's refusals before a request reaches Fastify (header overflow, request
// timeout, malformed HTTP/1.1), in the Connect error shape, naming the limit.
// Unlike Fastify's default handler, it never writes into a response that has
// already started.
export function clientErrorHandler(limits: HttpLimits) {
  const answers: Record<string, { status: number; code: string; message: string }> = {
    HPE_HEADER_OVERFLOW: {
      status: 431,
      code: "resource_exhausted",
      message: `request headers are larger than the limit of ${limits.maxHeaderBytes} bytes`,
    },
    ERR_HTTP_REQUEST_TIMEOUT: {
      status: 408,
      code: "deadline_exceeded",
      message:
        `request not received in time: headers are allowed ${limits.headersTimeoutMs} ms, ` +
        `the whole request ${limits.requestTimeoutMs} ms`,
    },
  };
  return (err: Error & { code?: string }, socket: Socket): void => {
    if (err.code === "ECONNRESET" || socket.destroyed) return;
    const started = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent; // Node's in-flight response on this socket
    if (socket.writable && !started) {
      const answer = answers[err.code ?? ""] ?? { status: 400, code: "invalid_argument", message: "malformed HTTP request" };
      const body = JSON.stringify({ code: answer.code, message: answer.message });
      socket.write(
        `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  };
}
