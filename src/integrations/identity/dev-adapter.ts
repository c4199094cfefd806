import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";

// Storage for the dev issuer's oidc-provider. Registered clients live in a
// file in the data dir (mode 0600) so an MCP client's registration survives
// a restart of `agentplane dev`; everything else (interactions, sessions,
// codes, grants, refresh tokens) lives in memory. Both are bounded because
// registration and authorization are open to anyone who can reach the port:
// past the cap the oldest entry goes, so a flood costs a re-login, never
// unbounded memory or disk; but a registered client someone is signed in
// with (a live grant, token or session) is never the one that goes: past
// the cap with every client in use, a registration is refused.
export interface AdapterPayload {
  consumed?: number;
  uid?: string;
  grantId?: string;
  [key: string]: unknown;
}

export interface Adapter {
  upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void>;
  find(id: string): Promise<AdapterPayload | undefined>;
  findByUid(uid: string): Promise<AdapterPayload | undefined>;
  findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
  consume(id: string): Promise<void>;
  destroy(id: string): Promise<void>;
  revokeByGrantId(grantId: string): Promise<void>;
}

export interface DevAdapterOptions {
  clientsFile: string;
  maxClients: number;
  // The error a registration gets when every client is in use.
  full: () => Error;
  // Interactions, sessions, codes, grants and tokens together.
  maxEntries: number;
}

interface Entry {
  model: string;
  payload: AdapterPayload;
  expiresAt?: number;
}

export function createDevAdapter(options: DevAdapterOptions): (model: string) => Adapter {
  const clients = new Map<string, AdapterPayload>(
    existsSync(options.clientsFile) ? (JSON.parse(readFileSync(options.clientsFile, "utf8")) as [string, AdapterPayload][]) : [],
  );
  const saveClients = () => {
    const tmp = `${options.clientsFile}.tmp`;
    writeFileSync(tmp, JSON.stringify([...clients]), { mode: 0o600 });
    renameSync(tmp, options.clientsFile);
  };

  const entries = new Map<string, Entry>();
  const byUid = new Map<string, string>();
  const byGrant = new Map<string, Set<string>>();
  const remove = (key: string) => {
    const entry = entries.get(key);
    if (!entry) return;
    entries.delete(key);
    const { uid, grantId } = entry.payload;
    if (typeof uid === "string" && byUid.get(`${entry.model}:${uid}`) === key) byUid.delete(`${entry.model}:${uid}`);
    if (typeof grantId === "string") {
      const keys = byGrant.get(grantId);
      keys?.delete(key);
      if (keys?.size === 0) byGrant.delete(grantId);
    }
  };
  const read = (key: string | undefined) => {
    const entry = key === undefined ? undefined : entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt !== undefined && entry.expiresAt <= Date.now()) {
      remove(key!);
      return undefined;
    }
    return entry.payload;
  };

  // Clients named by an unexpired grant, code, token or session.
  const clientsInUse = (): Set<string> => {
    const used = new Set<string>();
    for (const key of [...entries.keys()]) {
      const payload = read(key);
      if (!payload) continue;
      if (typeof payload.clientId === "string") used.add(payload.clientId);
      const authorizations = payload.authorizations;
      if (typeof authorizations === "object" && authorizations !== null) for (const clientId of Object.keys(authorizations)) used.add(clientId);
    }
    return used;
  };

  const clientAdapter: Adapter = {
    async upsert(id, payload) {
      if (!clients.has(id) && clients.size >= options.maxClients) {
        const used = clientsInUse();
        // Oldest first: the Map keeps insertion order.
        const idle = [...clients.keys()].filter((c) => !used.has(c)).slice(0, clients.size - options.maxClients + 1);
        if (clients.size - idle.length >= options.maxClients) throw options.full();
        for (const c of idle) clients.delete(c);
      }
      clients.delete(id); // re-inserted last: the newest survives eviction
      clients.set(id, payload);
      saveClients();
    },
    find: async (id) => clients.get(id),
    findByUid: async () => undefined,
    findByUserCode: async () => undefined,
    consume: async () => undefined,
    async destroy(id) {
      if (clients.delete(id)) saveClients();
    },
    revokeByGrantId: async () => undefined,
  };

  return (model) => {
    if (model === "Client") return clientAdapter;
    const keyOf = (id: string) => `${model}:${id}`;
    return {
      async upsert(id, payload, expiresIn) {
        const key = keyOf(id);
        remove(key);
        while (entries.size >= options.maxEntries) remove(entries.keys().next().value!);
        entries.set(key, { model, payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : undefined });
        if (typeof payload.uid === "string") byUid.set(`${model}:${payload.uid}`, key);
        if (typeof payload.grantId === "string") {
          const keys = byGrant.get(payload.grantId) ?? new Set();
          keys.add(key);
          byGrant.set(payload.grantId, keys);
        }
      },
      find: async (id) => read(keyOf(id)),
      findByUid: async (uid) => read(byUid.get(`${model}:${uid}`)),
      findByUserCode: async () => undefined, // no device flow
      async consume(id) {
        const payload = read(keyOf(id));
        if (payload) payload.consumed = Math.floor(Date.now() / 1000);
      },
      destroy: async (id) => remove(keyOf(id)),
      async revokeByGrantId(grantId) {
        for (const key of [...(byGrant.get(grantId) ?? [])]) remove(key);
      },
    };
  };
}
