import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import { httpError } from "./errors.js";

// Paths no surface serves answer in the API's error shape, so a client that
// reads `code` and `message` on every failure reads them here too. (The
// console answers its own paths; webhooks answer their route's errors.)
export function notFound(req: FastifyRequest, reply: FastifyReply) {
  const path = req.url.split("?", 1)[0];
  const { status, body } = httpError(new ConnectError(`no route for ${req.method} ${path}`, Code.NotFound));
  return reply.status(status).send(body);
}
