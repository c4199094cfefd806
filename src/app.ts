import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { DevIssuer } from "./integrations/identity/dev-issuer.js";
import type { Authenticator } from "./integrations/identity/index.js";
import type { SecretBox } from "./lib/secret-box.js";
import { createMetrics } from "./metrics.js";
import { createPlatform, type Platform } from "./service/platform.js";
import type { Store } from "./store/store.js";
import { connectSurface } from "./surfaces/connect.js";
import { devIssuerSurface } from "./surfaces/dev-issuer.js";
import { h2cServerFactory } from "./surfaces/h2c-server.js";
import { healthSurface } from "./surfaces/health.js";
import { restSurface } from "./surfaces/rest.js";

export interface AppOptions {
  store: Store;
  secrets: SecretBox;
  authenticator: Authenticator;
  logger: Logger;
  tenantClaim?: string;
  metricsToken?: string;
  devIssuer?: DevIssuer;
  bodyLimitBytes?: number;
}

export interface App {
  server: FastifyInstance;
  platform: Platform;
}

// One Fastify server, one port: every surface is an encapsulated plugin over
// the same platform implementation.
export async function buildApp(options: AppOptions): Promise<App> {
  const server = Fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    serverFactory: h2cServerFactory,
    bodyLimit: options.bodyLimitBytes ?? 1024 * 1024,
    // Per-request logs would cost more than the requests on the hot paths;
    // errors are still logged, and metrics count every request.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
  });
  const platform = createPlatform(options);
  const metrics = createMetrics();
  metrics.instrument(server);

  await server.register(healthSurface, { store: options.store, registry: metrics.registry, metricsToken: options.metricsToken });
  await server.register(connectSurface, { platform });
  await server.register(restSurface, { platform });
  if (options.devIssuer) await server.register(devIssuerSurface, { issuer: options.devIssuer });
  return { server, platform };
}
