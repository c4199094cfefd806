import { IncomingMessage } from "node:http";
import { ConnectError } from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { DevIssuer, TokenRequest } from "../../integrations/identity/dev-issuer.js";
import { DEV_TENANT, DEV_USER, grantableScopes, OIDC_SCOPES, REGISTRATION_LIMITS } from "../../integrations/identity/dev-login.js";
import { errorPage, PAGE_HEADERS, signInPage } from "./dev-sign-in-page.js";

// HTTP face of the `agentplane dev` issuer. The seed's variant B token
// request (client_credentials, JSON or form) is answered here as before;
// everything else an OAuth client does (discovery, RFC 8414 metadata, JWKS,
// registration, authorize, the code and refresh grants) goes to
// oidc-provider through the raw request and response, after the sign-in
// page below has asked the person.
export async function devIssuerSurface(app: FastifyInstance, { issuer }: { issuer: DevIssuer }): Promise<void> {
  const provider = await issuer.provider({
    renderError: errorPage,
    onServerError: (err) => app.log.error({ err }, "dev issuer failed"),
  });
  // Behind a TLS-terminating proxy the issuer is https while requests are not.
  provider.proxy = issuer.issuer.startsWith("https:");
  const handle = provider.callback();

  // Bodies stay bytes: the provider parses what it is handed again.
  app.addContentTypeParser(
    ["application/x-www-form-urlencoded", "application/json"],
    { parseAs: "buffer", bodyLimit: 64 * 1024 },
    (_req, body, done) => done(null, body),
  );

  const forward = (req: FastifyRequest, reply: FastifyReply, url = req.raw.url) => {
    reply.hijack();
    handle(replay(req, url), reply.raw);
  };

  app.post("/oauth/token", async (req, reply) => {
    const json = /^application\/json\b/i.test(req.headers["content-type"] ?? "");
    const fields = bodyFields(req);
    if (!fields) return reply.status(400).send({ error: "invalid_request", error_description: "the body is not valid JSON" });
    if (!json && req.body !== undefined && fields.grant_type !== "client_credentials") return forward(req, reply);
    let body = fields as TokenRequest;
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? "");
    if (basic) {
      const credentials = basicCredentials(basic[1]!);
      if (!credentials) return reply.status(401).send({ error: "invalid_client", error_description: "the Basic credentials are malformed" });
      body = { ...body, ...credentials };
    }
    try {
      return await issuer.issue(body);
    } catch (err) {
      const message = err instanceof ConnectError ? err.rawMessage : "server_error";
      const [error, description] = message.split(": ");
      return reply.status(error === "invalid_client" ? 401 : 400).send({ error, error_description: description });
    }
  });
  app.options("/oauth/token", forward);

  for (const path of ["/.well-known/openid-configuration", "/.well-known/jwks.json", "/oauth/authorize/:uid"]) {
    app.get(path, forward);
    app.options(path, forward);
  }
  app.get("/oauth/authorize", forward);
  app.post("/oauth/authorize", forward);
  // RFC 8414: the same document (its `issuer` is the URL it is fetched under).
  const discovery = (req: FastifyRequest, reply: FastifyReply) => forward(req, reply, "/.well-known/openid-configuration");
  app.get("/.well-known/oauth-authorization-server", discovery);
  app.options("/.well-known/oauth-authorization-server", discovery);

  // RFC 7591, open as MCP clients expect, bounded: the provider keeps at most
  // REGISTRATION_LIMITS.clients, dropping the oldest no one is signed in
  // with, and registrations are rate-limited (one bucket for everyone).
  const registrations = tokenBucket(REGISTRATION_LIMITS.burst, REGISTRATION_LIMITS.perMinute / 60);
  app.options("/oauth/register", async (_req, reply) =>
    reply
      .status(204)
      .headers({ "access-control-allow-origin": "*", "access-control-allow-methods": "POST", "access-control-allow-headers": "content-type", "access-control-max-age": "3600" })
      .send(),
  );
  app.post("/oauth/register", { bodyLimit: REGISTRATION_LIMITS.bodyBytes }, async (req, reply) => {
    // On the raw response: it is sent by Fastify or, hijacked, by the provider.
    reply.raw.setHeader("access-control-allow-origin", "*");
    const problem = registrationProblem(bodyFields(req));
    if (problem) return reply.status(400).send({ error: problem[0], error_description: problem[1] });
    const wait = registrations.take(Date.now());
    if (wait !== undefined)
      return reply
        .status(429)
        .header("retry-after", String(wait))
        .send({ error: "temporarily_unavailable", error_description: `too many registrations; try again in ${wait} s` });
    return forward(req, reply);
  });

  // The sign-in page, then the button. The interaction cookie (SameSite=Lax,
  // path-scoped to this interaction) is what ties the POST to the browser
  // that started the flow; another site's form post arrives without it.
  app.get("/oauth/interaction/:uid", async (req, reply) => {
    const interaction = await interactionOf(req, reply);
    if (!interaction) return;
    const { params } = interaction;
    const clientId = String(params.client_id);
    const client = await provider.Client.find(clientId);
    return reply.headers(PAGE_HEADERS).send(
      signInPage({
        user: DEV_USER,
        tenant: DEV_TENANT,
        clientId,
        clientName: client?.clientName,
        redirectUri: String(params.redirect_uri),
        scopes: grantableScopes(scopesOf(params.scope)),
        resources: resourcesOf(params.resource, issuer.audience),
        action: `/oauth/interaction/${interaction.uid}`,
      }),
    );
  });
  app.post("/oauth/interaction/:uid", async (req, reply) => {
    const interaction = await interactionOf(req, reply);
    if (!interaction) return;
    const { params } = interaction;
    // One click signs in and grants what was asked and an interactive login
    // may have (never platform:admin), so the flow does not come back for a
    // separate consent step.
    const grant = new provider.Grant({ accountId: DEV_USER, clientId: String(params.client_id) });
    const scopes = grantableScopes(scopesOf(params.scope));
    const resourceScopes = scopes.filter((s) => !OIDC_SCOPES.has(s));
    // The provider counts every scope it knows as an OpenID scope too.
    if (scopes.length) grant.addOIDCScope(scopes.join(" "));
    if (resourceScopes.length)
      for (const resource of resourcesOf(params.resource, issuer.audience)) grant.addResourceScope(resource, resourceScopes.join(" "));
    const grantId = await grant.save();
    const returnTo = await provider.interactionResult(
      req.raw,
      reply.raw,
      { login: { accountId: DEV_USER }, consent: { grantId } },
      { mergeWithLastSubmission: false },
    );
    return reply.redirect(returnTo, 303);
  });

  async function interactionOf(req: FastifyRequest, reply: FastifyReply) {
    try {
      const interaction = await provider.interactionDetails(req.raw, reply.raw);
      if (interaction.uid === (req.params as { uid: string }).uid) return interaction;
    } catch {
      // no cookie, expired, or another browser's interaction: same answer
    }
    reply
      .status(400)
      .headers(PAGE_HEADERS)
      .send(errorPage("interaction_expired", "This sign-in expired or was started in another browser. Start it again from the application."));
    return undefined;
  }
}

// The request as the provider must see it: the body Fastify read, replayed
// as a fresh readable request, so the provider parses it itself.
function replay(req: FastifyRequest, url: string | undefined): IncomingMessage {
  const raw = req.raw;
  if (!Buffer.isBuffer(req.body)) {
    raw.url = url;
    return raw;
  }
  const copy = new IncomingMessage(raw.socket);
  Object.assign(copy, {
    method: raw.method,
    url,
    headers: raw.headers,
    rawHeaders: raw.rawHeaders,
    httpVersion: raw.httpVersion,
    httpVersionMajor: raw.httpVersionMajor,
    httpVersionMinor: raw.httpVersionMinor,
    // Received in full: else ending the copy would destroy the socket.
    complete: true,
  });
  copy.push(req.body);
  copy.push(null);
  return copy;
}

// The form or JSON body as fields; undefined when JSON does not parse.
function bodyFields(req: FastifyRequest): Record<string, unknown> | undefined {
  if (!Buffer.isBuffer(req.body)) return {};
  const text = req.body.toString("utf8");
  if (!/^application\/json\b/i.test(req.headers["content-type"] ?? "")) return Object.fromEntries(new URLSearchParams(text));
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return undefined;
  }
}

function registrationProblem(fields: Record<string, unknown> | undefined): [string, string] | undefined {
  const L = REGISTRATION_LIMITS;
  if (!fields) return ["invalid_client_metadata", "the body is not valid JSON"];
  const uris = fields.redirect_uris;
  if (Array.isArray(uris)) {
    if (uris.length > L.redirectUris) return ["invalid_redirect_uri", `at most ${L.redirectUris} redirect_uris`];
    if (uris.some((u) => typeof u === "string" && u.length > L.redirectUriLength))
      return ["invalid_redirect_uri", `a redirect URI is at most ${L.redirectUriLength} characters`];
  }
  // The provider would fetch these; the dev issuer fetches nothing for a client.
  const fetched = ["jwks_uri", "sector_identifier_uri"].find((k) => k in fields);
  if (fetched) return ["invalid_client_metadata", `${fetched} is not supported by the dev issuer`];
  const name = fields.client_name;
  if (typeof name === "string" && name.length > L.clientNameLength)
    return ["invalid_client_metadata", `client_name is at most ${L.clientNameLength} characters`];
  return undefined;
}

// A token bucket: take() is undefined when a token was taken, else the
// seconds until one is there.
function tokenBucket(burst: number, perSecond: number) {
  let tokens = burst;
  let at = 0;
  return {
    take(now: number): number | undefined {
      tokens = Math.min(burst, tokens + (at ? ((now - at) / 1000) * perSecond : 0));
      at = now;
      if (tokens >= 1) {
        tokens -= 1;
        return undefined;
      }
      return Math.ceil((1 - tokens) / perSecond);
    },
  };
}

// RFC 6749 §2.3.1: base64 of the form-encoded id and secret joined by a
// colon; undefined for anything else (the decoding throws on a stray `%`).
function basicCredentials(encoded: string): { client_id: string; client_secret: string } | undefined {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return undefined;
  const decoded = Buffer.from(encoded, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) return undefined;
  try {
    const form = (s: string) => decodeURIComponent(s.replace(/\+/g, " "));
    return { client_id: form(decoded.slice(0, colon)), client_secret: form(decoded.slice(colon + 1)) };
  } catch {
    return undefined;
  }
}

const scopesOf = (scope: unknown) => (typeof scope === "string" ? scope.split(" ").filter(Boolean) : []);

const resourcesOf = (resource: unknown, fallback: string) =>
  typeof resource === "string" ? [resource] : Array.isArray(resource) ? resource.map(String) : [fallback];
