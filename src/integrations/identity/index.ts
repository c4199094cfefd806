import type { Logger } from "pino";
import type { Observer } from "../../lib/observer.js";
import type { AuthConfig } from "../../config.js";
import { createIntrospectionAuthenticator } from "./introspection.js";
import { createJwtAuthenticator } from "./jwt.js";
import type { Authenticator } from "./principal.js";

export type { Authenticator, Principal } from "./principal.js";

export interface AuthenticatorExtras {
  jwksCooldownMs?: number;
  // `<public url>/mcp`: a token for it is good on the MCP endpoint only.
  mcpResource?: string;
  // Where identity provider problems only the operator can fix are reported.
  log?: Pick<Logger, "error" | "warn">;
  // Told of identity provider requests and token cache look-ups (metrics).
  observer?: Observer;
}

// `dev` is built by the CLI from its DevIssuer; here only the real modes.
export function createAuthenticator(auth: Exclude<AuthConfig, { mode: "dev" }>, extras: AuthenticatorExtras = {}): Authenticator {
  return auth.mode === "jwt"
    ? createJwtAuthenticator({ ...auth, jwksCooldownMs: extras.jwksCooldownMs, mcpResource: extras.mcpResource, observer: extras.observer, log: extras.log })
    : createIntrospectionAuthenticator({ ...auth, log: extras.log, mcpResource: extras.mcpResource, observer: extras.observer });
}
