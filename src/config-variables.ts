// The variables a newcomer sets first: config.ts reads them by these names
// and defaults, and `agentplane serve --help` and `dev --help` list them from
// here. No imports, so `--help` loads nothing else. The
// configuration table (docs/reference/configuration.md) lists every variable.

export interface ConfigVariable {
  name: string;
  // As `--help` shows it; the parsed default is next to the variable's reader.
  shownDefault: string;
  what: string;
}

export const DEFAULT_PORT = 8080;

export const PORT: ConfigVariable = {
  name: "AGENTPLANE_PORT",
  shownDefault: String(DEFAULT_PORT),
  what: "listen port (HTTP/1.1 and cleartext HTTP/2 on the same port)",
};
export const HOST: ConfigVariable = { name: "AGENTPLANE_HOST", shownDefault: "0.0.0.0; dev: 127.0.0.1", what: "listen address" };
export const PUBLIC_URL: ConfigVariable = {
  name: "AGENTPLANE_PUBLIC_URL",
  shownDefault: "http://localhost:<port>; dev: http://127.0.0.1:<port>",
  what: "the base URL callers use (the dev issuer's iss, signed sources' url)",
};
export const DATA_DIR: ConfigVariable = { name: "AGENTPLANE_DATA_DIR", shownDefault: "./data", what: "the SQLite file, and dev's issuer key, clients and secret key" };
export const DATABASE_URL: ConfigVariable = {
  name: "AGENTPLANE_DATABASE_URL",
  shownDefault: "none, SQLite in the data dir",
  what: "postgres://user:password@host:5432/db selects PostgreSQL",
};
export const ROLE: ConfigVariable = { name: "AGENTPLANE_ROLE", shownDefault: "all", what: "api, worker or all (--role wins over it)" };
export const LOG_LEVEL: ConfigVariable = { name: "AGENTPLANE_LOG_LEVEL", shownDefault: "info", what: "pino log level" };

// What `serve` and `dev` list under their usage.
export const SERVE_VARIABLES: readonly ConfigVariable[] = [PORT, HOST, PUBLIC_URL, DATA_DIR, DATABASE_URL, ROLE, LOG_LEVEL];
// `dev` always runs every role.
export const DEV_VARIABLES: readonly ConfigVariable[] = SERVE_VARIABLES.filter((v) => v !== ROLE);
