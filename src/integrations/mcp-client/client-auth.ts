import { randomUUID } from "node:crypto";
import { importPKCS8, SignJWT } from "jose";
import { secretRedactor } from "../../lib/secret-redaction.js";
import { clean } from "../outbound/upstream-reason.js";

import { TOKEN_ENDPOINT_AUTH_METHODS, type TokenEndpointAuthMethod } from "./token-endpoint-auth-methods.js";

export { TOKEN_ENDPOINT_AUTH_METHODS, type TokenEndpointAuthMethod };

export interface ClientCredentials {
  clientId: string;
  clientSecret?: string;
  // The private_key_jwt key pair's private half (PKCS#8 PEM) and its JWK's kid.
  privateKey?: { pem: string; alg: "RS256" | "ES256"; kid: string };
  // Pinned by the skill; absent: chosen from the authorization server's metadata.
  tokenEndpointAuthMethod?: TokenEndpointAuthMethod;
}

const has = (c: ClientCredentials, method: TokenEndpointAuthMethod) => (method === "private_key_jwt" ? c.privateKey !== undefined : !!c.clientSecret);

export type MethodChoice = { method: TokenEndpointAuthMethod; unadvertised?: string[] } | { refusal: string };

// A pinned method is used as it is (the server's list may be incomplete; if
// the server refuses, `unadvertised` lets the error say it is not listed).
// Otherwise the first of PREFERENCE that the server lists and the skill has a
// credential for; a server that lists none takes client_secret_basic
// (RFC 8414 §2's default), or private_key_jwt from a skill with only a key.
export function chooseMethod(credentials: ClientCredentials, advertised: string[] | undefined): MethodChoice {
  const pinned = credentials.tokenEndpointAuthMethod;
  if (pinned) {
    if (!has(credentials, pinned)) return { refusal: `${pinned} is pinned but the skill has no ${pinned === "private_key_jwt" ? "key pair" : "client secret"}` };
    return advertised && !advertised.includes(pinned) ? { method: pinned, unadvertised: advertised } : { method: pinned };
  }
  if (!advertised) {
    const method = (["client_secret_basic", "private_key_jwt"] as const).find((m) => has(credentials, m));
    return method ? { method } : { refusal: "the skill has neither a client secret nor a key pair" };
  }
  const method = TOKEN_ENDPOINT_AUTH_METHODS.find((m) => advertised.includes(m) && has(credentials, m));
  if (method) return { method };
  const held = credentials.privateKey ? "a key pair (private_key_jwt)" : "a client secret (client_secret_basic, client_secret_post)";
  return {
    refusal: `the authorization server accepts ${clean(advertised.join(", "))} at its token endpoint, and the skill has ${held}; no request was sent (give the skill ${
      credentials.privateKey ? "a client secret" : "a key pair with signing_alg and register its public_jwk"
    }, or pin token_endpoint_auth_method)`,
  };
}

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
// Long enough for clock skew, short enough that a copy is soon useless.
const ASSERTION_LIFETIME_S = 60;

// Adds the client's authentication to a token request.
export class ClientAuthenticator {
  #key?: ReturnType<typeof importPKCS8>;

  constructor(
    private readonly credentials: ClientCredentials,
    // The issuer identifier: a client assertion's audience.
    private readonly issuer: string,
  ) {}

  async apply(method: TokenEndpointAuthMethod, headers: Headers, form: URLSearchParams): Promise<void> {
    const { clientId, clientSecret = "" } = this.credentials;
    switch (method) {
      case "client_secret_basic":
        headers.set("authorization", basicCredential(clientId, clientSecret));
        return;
      case "client_secret_post":
        form.set("client_id", clientId);
        form.set("client_secret", clientSecret);
        return;
      case "private_key_jwt":
        // client_id is optional in RFC 7521 §4.2, but some servers (Spring
        // Authorization Server) require it.
        form.set("client_id", clientId);
        form.set("client_assertion_type", JWT_BEARER);
        form.set("client_assertion", await this.#assertion());
        return;
    }
  }

  // RFC 7523 §3: iss = sub = client_id, a unique jti, a short exp, and an
  // audience that identifies the authorization server: its issuer
  // identifier, as the only value. RFC 7523 and OIDC Core §9 also allow the
  // token endpoint URL, but draft-ietf-oauth-rfc7523bis (after the 2025
  // audience injection findings) has clients send the issuer alone and
  // servers accept it; oidc-provider does. kid names the registered key.
  async #assertion(): Promise<string> {
    const { clientId, privateKey } = this.credentials;
    const key = privateKey!;
    this.#key ??= importPKCS8(key.pem, key.alg);
    return new SignJWT({})
      .setProtectedHeader({ alg: key.alg, kid: key.kid })
      .setIssuer(clientId)
      .setSubject(clientId)
      .setAudience(this.issuer)
      .setJti(randomUUID())
      .setIssuedAt()
      .setExpirationTime(`${ASSERTION_LIFETIME_S}s`)
      .sign(await this.#key);
  }
}

// RFC 6749 §2.3.1: each form-encoded before they are joined.
function basicCredential(clientId: string, clientSecret: string): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");
  return "Basic " + Buffer.from(`${enc(clientId)}:${enc(clientSecret)}`).toString("base64");
}

// Removes the client secret from a text kept or logged, as sent and in the
// Basic credential made of it.
export function clientSecretRedactor({ clientId, clientSecret }: { clientId: string; clientSecret?: string }): (text: string) => string {
  if (!clientSecret) return (text) => text;
  return secretRedactor([clientSecret, basicCredential(clientId, clientSecret)]);
}
