import { ConnectError } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import type { DevIssuer, TokenRequest } from "../integrations/identity/dev-issuer.js";

// HTTP face of the `agentplane dev` issuer: the seed's variant B token
// request (JSON) and, for OAuth clients, the same as a form; discovery and JWKS.
export async function devIssuerSurface(app: FastifyInstance, { issuer }: { issuer: DevIssuer }): Promise<void> {
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });
  app.post("/oauth/token", async (req, reply) => {
    let body = (req.body ?? {}) as TokenRequest;
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? "");
    if (basic) {
      const [id, secret] = Buffer.from(basic[1]!, "base64").toString("utf8").split(":");
      body = { ...body, client_id: decodeURIComponent(id ?? ""), client_secret: decodeURIComponent(secret ?? "") };
    }
    try {
      return await issuer.issue(body);
    } catch (err) {
      const message = err instanceof ConnectError ? err.rawMessage : "server_error";
      const [error, description] = message.split(": ");
      return reply.status(error === "invalid_client" ? 401 : 400).send({ error, error_description: description });
    }
  });
  app.get("/.well-known/jwks.json", async () => issuer.publicJwks);
  app.get("/.well-known/openid-configuration", async () => ({
    issuer: issuer.issuer,
    token_endpoint: `${issuer.issuer}/oauth/token`,
    jwks_uri: `${issuer.issuer}/.well-known/jwks.json`,
    grant_types_supported: ["client_credentials"],
    token_endpoint_auth_methods_supported: ["client_secret_post", "client_secret_basic"],
  }));
}
