import { NO_OBSERVER, type Observer } from "../../lib/observer.js";
import type { FetchLike } from "../outbound/guarded-fetch.js";
import type { SkillAuth } from "./auth-fetch.js";
import { OAuthSession, type OAuthSkillConfig, type TokenEndpointAuthMethod } from "./oauth.js";
import { SkillClient } from "./skill-client.js";

export type SkillAuthConfig =
  | { mode: "none" }
  | { mode: "static_bearer"; token: string }
  | { mode: "headers"; headers: Record<string, string> }
  | ({ mode: "oauth" } & Omit<OAuthSkillConfig, "mcpUrl">);

export interface SkillConnection {
  // Changes whenever the skill's configuration does (id and update time), so
  // an edited skill gets a fresh client and token.
  key: string;
  url: string;
  auth: SkillAuthConfig;
}

export interface SkillPoolOptions {
  fetch: FetchLike;
  discoveryTimeoutMs: number;
  callTimeoutMs: number;
  version: string;
  // Told of every OAuth token request (metrics).
  observer?: Observer;
}

// Connected MCP clients and OAuth sessions, one per skill version, reused
// across runs: the initialize round trip and the token request happen once,
// the token is reused until shortly before it expires.
export class SkillPool {
  readonly #clients = new Map<string, Promise<SkillClient>>();
  readonly #sessions = new Map<string, OAuthSession>();
  #tokenRequests = 0;
  #lastTokenMethod?: TokenEndpointAuthMethod;

  constructor(private readonly options: SkillPoolOptions) {}

  get tokenRequests(): number {
    return this.#tokenRequests;
  }

  // How the last token request authenticated the client (what the probe shows).
  get lastTokenMethod(): TokenEndpointAuthMethod | undefined {
    return this.#lastTokenMethod;
  }

  client(connection: SkillConnection): Promise<SkillClient> {
    let client = this.#clients.get(connection.key);
    if (!client) {
      client = SkillClient.connect({ url: connection.url, auth: this.#auth(connection), fetch: this.options.fetch, callTimeoutMs: this.options.callTimeoutMs, version: this.options.version });
      // A failed connection is not kept: the next call tries again.
      client.catch(() => this.#clients.delete(connection.key));
      this.#clients.set(connection.key, client);
    }
    return client;
  }

  // A fresh connection, not pooled (probes, refreshes of a changed skill).
  connectOnce(connection: SkillConnection): Promise<SkillClient> {
    return SkillClient.connect({ url: connection.url, auth: this.#auth(connection), fetch: this.options.fetch, callTimeoutMs: this.options.callTimeoutMs, version: this.options.version });
  }

  // Drops a client whose connection broke; the next call reconnects.
  evict(key: string): void {
    const client = this.#clients.get(key);
    this.#clients.delete(key);
    void client?.then((c) => c.close()).catch(() => {});
  }

  async close(): Promise<void> {
    const clients = [...this.#clients.values()];
    this.#clients.clear();
    await Promise.all(clients.map((c) => c.then((x) => x.close()).catch(() => {})));
  }

  #auth(connection: SkillConnection): SkillAuth {
    const a = connection.auth;
    if (a.mode !== "oauth") return a;
    let session = this.#sessions.get(connection.key);
    if (!session) {
      session = new OAuthSession({ mcpUrl: connection.url, ...a }, this.options.fetch, this.options.discoveryTimeoutMs, (outcome, method) => {
        this.#tokenRequests++;
        this.#lastTokenMethod = method;
        (this.options.observer ?? NO_OBSERVER).tokenRequest(outcome);
      });
      this.#sessions.set(connection.key, session);
    }
    return { mode: "oauth", session };
  }
}
