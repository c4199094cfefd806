// A tiny JWKS endpoint on 127.0.0.1 whose key set (or failure status) a test
// can change at any time, e.g. to simulate an identity provider rotating keys.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from "jose";
import { listenOnLoopback } from "./listen.js";

export interface JwksServer {
  /** URL of the key set, e.g. http://127.0.0.1:PORT/jwks */
  url: string;
  /** Replaces the served key set (public JWKs only). */
  setKeys(keys: JWK[]): void;
  /** Answer every request with this status and no key set; undefined: serve the keys again. */
  setFailure(status: number | undefined): void;
  /** GET requests received so far. */
  requests(): number;
  close(): Promise<void>;
}

export async function startJwksServer(keys: JWK[] = []): Promise<JwksServer> {
  let served = keys;
  let failure: number | undefined;
  let requests = 0;
  const server: Server = createServer((req, res) => {
    requests += 1;
    if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/jwks") {
      res.writeHead(404).end();
      return;
    }
    if (failure !== undefined) {
      res.writeHead(failure, { "content-type": "text/plain" }).end("unavailable");
      return;
    }
    res.writeHead(200, { "content-type": "application/jwk-set+json" }).end(JSON.stringify({ keys: served }));
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/jwks`,
    setKeys: (next) => {
      served = next;
    },
    setFailure: (status) => {
      failure = status;
    },
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/** An identity provider: one RS256 key served as a JWKS, and the access tokens it signs. */
export interface SigningIdp {
  issuer: string;
  audience: string;
  jwks: JwksServer;
  /** A 10-minute at+jwt for `subject`, with read and write scope unless `claims` say otherwise. */
  sign(subject: string, claims?: JWTPayload): Promise<string>;
  close(): Promise<void>;
}

export async function startSigningIdp(issuer: string, audience: string): Promise<SigningIdp> {
  const { privateKey, publicKey } = await generateKeyPair("RS256");
  const jwks = await startJwksServer([{ ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256", use: "sig" }]);
  return {
    issuer,
    audience,
    jwks,
    sign: (subject, claims = {}) =>
      new SignJWT({ scope: "platform:read platform:write", ...claims })
        .setProtectedHeader({ alg: "RS256", kid: "k1", typ: "at+jwt" })
        .setIssuer(issuer)
        .setAudience(audience)
        .setSubject(subject)
        .setIssuedAt()
        .setExpirationTime("10m")
        .sign(privateKey),
    close: () => jwks.close(),
  };
}

/** A loopback port that nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
