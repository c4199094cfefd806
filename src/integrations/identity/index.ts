import type { AuthConfig } from "../../config.js";
import { createIntrospectionAuthenticator } from "./introspection.js";
import { createJwtAuthenticator } from "./jwt.js";
import type { Authenticator } from "./principal.js";

export type { Authenticator, Principal } from "./principal.js";

// `dev` is built by the CLI from its DevIssuer; here only the real modes.
export function createAuthenticator(auth: Exclude<AuthConfig, { mode: "dev" }>, jwksCooldownMs?: number): Authenticator {
  return auth.mode === "jwt" ? createJwtAuthenticator({ ...auth, jwksCooldownMs }) : createIntrospectionAuthenticator(auth);
}
