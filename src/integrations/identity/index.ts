import type { Logger } from "pino";
import type { Observer } from "../../lib/observer.js";
import { createIntrospectionAuthenticator, type IntrospectionOptions } from "./introspection.js";
import { createJwtAuthenticator, type JwtOptions } from "./jwt.js";
import type { Authenticator } from "./principal.js";

export type { Authenticator, Principal } from "./principal.js";

// How tokens are checked, as configured (config.ts reads it).
export type AuthConfig =
  | ({ mode: "jwt" } & Required<Pick<JwtOptions, "issuer" | "audience" | "algorithms" | "clockToleranceSeconds">> & Pick<JwtOptions, "jwksUrl">)
  | ({ mode: "introspection" } & Omit<IntrospectionOptions, "log" | "cacheMaxEntries">)
  // The embedded issuer of `agentplane dev`; `serve` never selects it.
  | { mode: "dev"; audience: string; clockToleranceSeconds: number };

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
