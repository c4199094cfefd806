// The store as the configuration names it: opened by the serving process,
// each runtime thread and the store commands, so that none of them loads
// another's dependencies to get it.
import type { StoreConfig } from "../config.js";
import { openStore as openConfiguredStore, type OpenStoreOptions } from "../store/open.js";

export function storeOptions(config: StoreConfig): OpenStoreOptions {
  return {
    databaseUrl: config.databaseUrl,
    poolSize: config.databasePoolSize,
    sqlite: {
      path: config.sqlitePath,
      synchronous: config.sqliteSynchronous,
      groupCommit: { windowMs: config.ingestBatchWindowMs, maxBatch: config.ingestBatchMax },
    },
  };
}

export function openStore(config: StoreConfig) {
  return openConfiguredStore(storeOptions(config));
}
