import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join, relative, sep } from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

// What the browser app needs to log in: the OAuth public client and what it
// asks the issuer for (GET /console/config.json).
export interface ConsoleSettings {
  issuer: string;
  clientId: string;
  audience: string;
  scopes: string;
}

export interface ConsoleOptions {
  settings: ConsoleSettings;
  // The Vite build (dist/console).
  dir: string;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
};

interface Asset {
  type: string;
  body: Buffer;
  compressible: boolean;
  // Compressed on the first request that accepts it, on zlib's thread pool:
  // at start it was 70 ms of CPU for every server that never served the
  // console (API-only replicas, most test servers).
  gzip?: Promise<Buffer>;
  // Vite puts a content hash in every name under assets/.
  immutable: boolean;
}

const gzipAsync = promisify(gzip);

// The build is a few hundred KB: read once at start, gzipped at most once, served
// from memory. Only files found here are served, so no request path ever
// reaches the file system.
function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  if (!existsSync(join(dir, "index.html"))) return assets;
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const file = join(d, name);
      if (statSync(file).isDirectory()) walk(file);
      else {
        const path = relative(dir, file).split(sep).join("/");
        const body = readFileSync(file);
        const type = TYPES[extname(name)] ?? "application/octet-stream";
        const compressible = /^(text\/|application\/json|image\/svg)/.test(type) && body.length > 512;
        assets.set(path, { type, body, compressible, immutable: path.startsWith("assets/") });
      }
    }
  };
  walk(dir);
  return assets;
}

// Only this origin, plus the issuer for the token request (a browser fetch);
// the login itself is a top-level navigation, which CSP does not govern.
function contentSecurityPolicy(issuer: string): string {
  let issuerOrigin = "";
  try {
    issuerOrigin = issuer ? new URL(issuer).origin : "";
  } catch {
    // Not a URL: the console reports it when it tries to log in.
  }
  return [
    "default-src 'self'",
    `connect-src 'self'${issuerOrigin ? ` ${issuerOrigin}` : ""}`,
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

// The operator console at /console: a static single-page app, a browser
// client of the same PlatformService (src/surfaces/connect/connect.ts). `GET /`
// leads there.
export async function consoleSurface(app: FastifyInstance, { settings, dir }: ConsoleOptions): Promise<void> {
  const assets = loadAssets(dir);
  const csp = contentSecurityPolicy(settings.issuer);
  const config = JSON.stringify({ issuer: settings.issuer, client_id: settings.clientId, audience: settings.audience, scopes: settings.scopes });

  const send = (req: FastifyRequest, reply: FastifyReply, asset: Asset) => {
    reply
      .header("content-type", asset.type)
      .header("cache-control", asset.immutable ? "public, max-age=31536000, immutable" : "no-cache")
      .header("x-content-type-options", "nosniff")
      .header("vary", "accept-encoding");
    if (asset.type.startsWith("text/html"))
      // The callback URL carries the authorization code: never in a Referer.
      reply.header("content-security-policy", csp).header("referrer-policy", "no-referrer").header("x-frame-options", "DENY");
    if (asset.compressible && /\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""))) {
      asset.gzip ??= gzipAsync(asset.body, { level: 9 });
      return asset.gzip.then((body) => reply.header("content-encoding", "gzip").send(body));
    }
    return reply.send(asset.body);
  };

  app.get("/", (_req, reply) => reply.redirect("/console/"));
  app.get("/console", (_req, reply) => reply.redirect("/console/"));
  app.get("/console/config.json", (_req, reply) => reply.header("cache-control", "no-cache").type("application/json").send(config));
  app.get("/console/*", (req, reply) => {
    const path = (req.params as { "*": string })["*"];
    const asset = assets.get(path);
    if (asset) return send(req, reply, asset);
    // A missing hashed asset is a 404, not the app: the browser asked for code.
    if (path.startsWith("assets/") || extname(path) !== "") return reply.status(404).send({ code: "not_found", message: "no such file" });
    const index = assets.get("index.html");
    if (!index)
      return reply.status(503).type("text/plain; charset=utf-8").send("The console is not built: run `make build` (it builds dist/console).\n");
    // Client routes (/console/t/acme/runs/…) are the app's to draw.
    return send(req, reply, index);
  });
}
