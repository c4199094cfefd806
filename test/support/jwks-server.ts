// A tiny JWKS endpoint on 127.0.0.1 whose key set (or failure status) a test
// can change at any time, e.g. to simulate an identity provider rotating keys.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { JWK } from "jose";
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

/** A loopback port that nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
