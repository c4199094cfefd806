import { NO_OBSERVER, type Observer } from "../../lib/observer.js";
import type { FetchLike } from "../outbound/guarded-fetch.js";
import type { LiveSkillAuth } from "./auth-fetch.js";
import { OAuthSession, type OAuthSkillConfig, type TokenEndpointAuthMethod } from "./oauth.js";
import { SkillClient } from "./skill-client.js";

// A skill's auth with its secrets opened in memory, for one connection
// (see `LiveSkillAuth` for the family of names).
export type OpenedSkillAuth =
  | { mode: "none" }
  | { mode: "static_bearer"; token: string }
  | { mode: "headers"; headers: Record<string, string> }
  | ({ mode: "oauth" } & Omit<OAuthSkillConfig, "mcpUrl">);

export interface SkillConnection {
  // The skill: a new version of it replaces the pooled one.
  skillId: string;
  // Changes whenever the skill's configuration does (id and update time), so
  // an edited skill gets a fresh client and token.
  key: string;
  url: string;
  auth: OpenedSkillAuth;
}

export interface SkillPoolOptions {
  fetch: FetchLike;
  discoveryTimeoutMs: number;
  callTimeoutMs: number;
  version: string;
  // Told of every OAuth token request (metrics).
  observer?: Observer;
  // Skills kept at most; past it the least recently used is dropped.
  maxSkills?: number;
  // A skill unused this long is dropped (at the next use of the pool).
  idleMs?: number;
  now?: () => number;
}

// Bounds of the pool (docs/reference/limits.md): what a thread keeps for skills
// it called, each a connected client and maybe an OAuth token.
const SKILL_POOL_MAX = 500;
const SKILL_POOL_IDLE_MS = 10 * 60_000;

interface Entry {
  skillId: string;
  client?: Promise<SkillClient>;
  session?: OAuthSession;
  usedAt: number;
}

// Connected MCP clients and OAuth sessions, one per skill version, reused
// across runs: the initialize round trip and the token request happen once,
// the token is reused until shortly before it expires. Bounded: a skill's
// older versions go when a newer one is used, idle skills (deleted ones
// among them) expire, and the least recently used go past `maxSkills`.
export class SkillPool {
  // In order of last use, the least recent first.
  readonly #entries = new Map<string, Entry>();
  // The pooled key of each skill (its latest version seen).
  readonly #keyOf = new Map<string, string>();
  readonly #max: number;
  readonly #idleMs: number;
  readonly #now: () => number;
  #tokenRequests = 0;
  #lastTokenMethod?: TokenEndpointAuthMethod;

  constructor(private readonly options: SkillPoolOptions) {
    this.#max = options.maxSkills ?? SKILL_POOL_MAX;
    this.#idleMs = options.idleMs ?? SKILL_POOL_IDLE_MS;
    this.#now = options.now ?? Date.now;
  }

  get tokenRequests(): number {
    return this.#tokenRequests;
  }

  // How the last token request authenticated the client (what the probe shows).
  get lastTokenMethod(): TokenEndpointAuthMethod | undefined {
    return this.#lastTokenMethod;
  }

  // Skill versions held (a client, an OAuth session, or both).
  get size(): number {
    return this.#entries.size;
  }

  client(connection: SkillConnection): Promise<SkillClient> {
    const entry = this.#entry(connection);
    if (!entry.client) {
      const client = SkillClient.connect({ url: connection.url, auth: this.#auth(connection, entry), fetch: this.options.fetch, callTimeoutMs: this.options.callTimeoutMs, version: this.options.version });
      // A failed connection is not kept: the next call tries again.
      client.catch(() => {
        if (entry.client === client) entry.client = undefined;
      });
      entry.client = client;
    }
    return entry.client;
  }

  // A fresh connection, not pooled (probes, refreshes of a changed skill).
  connectOnce(connection: SkillConnection): Promise<SkillClient> {
    const entry = this.#entry(connection);
    return SkillClient.connect({ url: connection.url, auth: this.#auth(connection, entry), fetch: this.options.fetch, callTimeoutMs: this.options.callTimeoutMs, version: this.options.version });
  }

  // Drops a client whose connection broke; the next call reconnects.
  evict(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry?.client) return;
    const client = entry.client;
    entry.client = undefined;
    void client.then((c) => c.close()).catch(() => {});
  }

  async close(): Promise<void> {
    const clients = [...this.#entries.values()].flatMap((e) => (e.client ? [e.client] : []));
    this.#entries.clear();
    this.#keyOf.clear();
    await Promise.all(clients.map((c) => c.then((x) => x.close()).catch(() => {})));
  }

  // The connection's entry, now the most recently used; on the way, drops
  // the skill's other version, idle skills and those past the bound.
  #entry(connection: SkillConnection): Entry {
    const now = this.#now();
    const previous = this.#keyOf.get(connection.skillId);
    if (previous !== undefined && previous !== connection.key) this.#drop(previous);
    let entry = this.#entries.get(connection.key);
    if (entry) this.#entries.delete(connection.key);
    else entry = { skillId: connection.skillId, usedAt: now };
    entry.usedAt = now;
    this.#entries.set(connection.key, entry);
    this.#keyOf.set(connection.skillId, connection.key);
    for (const [key, e] of this.#entries) {
      if (key === connection.key || (now - e.usedAt < this.#idleMs && this.#entries.size <= this.#max)) break;
      this.#drop(key);
    }
    return entry;
  }

  // A dropped client may still serve a call begun with it; it is closed once
  // no call can still be waiting on it (a call's timeout).
  #drop(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    if (this.#keyOf.get(entry.skillId) === key) this.#keyOf.delete(entry.skillId);
    const client = entry.client;
    if (client) setTimeout(() => void client.then((c) => c.close()).catch(() => {}), this.options.callTimeoutMs).unref();
  }

  #auth(connection: SkillConnection, entry: Entry): LiveSkillAuth {
    const a = connection.auth;
    if (a.mode !== "oauth") return a;
    entry.session ??= new OAuthSession({ mcpUrl: connection.url, ...a }, this.options.fetch, this.options.discoveryTimeoutMs, (outcome, method) => {
      this.#tokenRequests++;
      this.#lastTokenMethod = method;
      (this.options.observer ?? NO_OBSERVER).tokenRequest(outcome);
    });
    return { mode: "oauth", session: entry.session };
  }
}
