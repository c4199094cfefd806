import { timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";

export interface HealthOptions {
  // Resolves when the store answers (the composition root hands over its ping).
  storeAnswers: () => Promise<unknown>;
  // The text GET /metrics answers, and its content type.
  exposition: { contentType: string; metrics(): Promise<string> };
  // When set, /metrics needs `Authorization: Bearer <token>`.
  metricsToken?: string;
}

function bearerMatches(header: string | undefined, token: string): boolean {
  const given = Buffer.from(header ?? "");
  const expected = Buffer.from(`Bearer ${token}`);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export async function healthSurface(app: FastifyInstance, { storeAnswers, exposition, metricsToken }: HealthOptions): Promise<void> {
  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    try {
      await storeAnswers();
      return { status: "ready" };
    } catch {
      return reply.status(503).send({ status: "unavailable", message: "store unavailable" });
    }
  });
  app.get("/metrics", async (req, reply) => {
    if (metricsToken !== undefined && !bearerMatches(req.headers.authorization, metricsToken))
      return reply.status(401).header("www-authenticate", "Bearer").send({ code: "unauthenticated", message: "metrics need a bearer token" });
    return reply.type(exposition.contentType).send(await exposition.metrics());
  });
}
