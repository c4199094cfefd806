// Login as an OAuth public client: authorization code + PKCE (S256) against
// the configured issuer. The access token lives in this module's memory only;
// sessionStorage holds just the PKCE verifier, state and return path across
// the redirect, and is cleared when the code is exchanged.
import * as oauth from "oauth4webapi";

export interface ConsoleConfig {
  issuer: string;
  client_id: string;
  audience: string;
  scopes: string;
}

export interface Session {
  accessToken: string;
  // Milliseconds since the epoch; undefined when the issuer gave no expires_in.
  expiresAt?: number;
  subject?: string;
}

const PENDING_KEY = "agentplane.console.login";
export const CALLBACK_PATH = "/console/callback";

interface Pending {
  verifier: string;
  state: string;
  returnTo: string;
}

let session: Session | undefined;

export function currentSession(): Session | undefined {
  if (session?.expiresAt !== undefined && session.expiresAt <= Date.now()) session = undefined;
  return session;
}

export function forgetSession(): void {
  session = undefined;
}

const redirectUri = () => `${location.origin}${CALLBACK_PATH}`;

// A plain-http issuer is the operator's choice (`agentplane dev` on loopback);
// oauth4webapi refuses http unless told.
function requestOptions(issuer: URL) {
  return issuer.protocol === "http:" ? { [oauth.allowInsecureRequests]: true } : {};
}

// OpenID discovery first (Auth0, Hydra, oidc-provider), then RFC 8414.
async function discover(config: ConsoleConfig): Promise<oauth.AuthorizationServer> {
  const issuer = new URL(config.issuer);
  let firstError: unknown;
  for (const algorithm of ["oidc", "oauth2"] as const) {
    try {
      const response = await oauth.discoveryRequest(issuer, { algorithm, ...requestOptions(issuer) });
      return await oauth.processDiscoveryResponse(issuer, response);
    } catch (err) {
      firstError ??= err;
    }
  }
  throw new Error(`discovery of ${config.issuer} failed: ${(firstError as Error).message}`);
}

export async function startLogin(config: ConsoleConfig, returnTo: string): Promise<never> {
  const as = await discover(config);
  if (!as.authorization_endpoint) throw new Error(`${config.issuer} advertises no authorization_endpoint`);
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const url = new URL(as.authorization_endpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", config.client_id);
  url.searchParams.set("redirect_uri", redirectUri());
  url.searchParams.set("scope", config.scopes);
  url.searchParams.set("state", state);
  url.searchParams.set("code_challenge", await oauth.calculatePKCECodeChallenge(verifier));
  url.searchParams.set("code_challenge_method", "S256");
  // Auth0 and Hydra name the API by `audience`; oidc-provider takes its
  // default resource when none is sent.
  if (config.audience) url.searchParams.set("audience", config.audience);
  sessionStorage.setItem(PENDING_KEY, JSON.stringify({ verifier, state, returnTo } satisfies Pending));
  location.assign(url.href);
  return new Promise<never>(() => {});
}

// Exchanges the code in the callback URL; answers where the user was going.
export async function completeLogin(config: ConsoleConfig, callbackUrl: URL): Promise<string> {
  const raw = sessionStorage.getItem(PENDING_KEY);
  sessionStorage.removeItem(PENDING_KEY);
  if (!raw) throw new Error("no login in progress in this tab; sign in again");
  const pending = JSON.parse(raw) as Pending;
  const as = await discover(config);
  const client: oauth.Client = { client_id: config.client_id };
  const params = oauth.validateAuthResponse(as, client, callbackUrl, pending.state);
  const issuer = new URL(config.issuer);
  const response = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, redirectUri(), pending.verifier, {
    ...requestOptions(issuer),
    ...(config.audience ? { additionalParameters: { audience: config.audience } } : {}),
  });
  const result = await oauth.processAuthorizationCodeResponse(as, client, response);
  const claims = oauth.getValidatedIdTokenClaims(result);
  session = {
    accessToken: result.access_token,
    expiresAt: result.expires_in ? Date.now() + result.expires_in * 1000 : undefined,
    subject: claims?.sub,
  };
  return pending.returnTo;
}

// The issuer's RP-initiated logout endpoint, when it advertises one.
export async function endSessionUrl(config: ConsoleConfig): Promise<string | undefined> {
  const as = await discover(config);
  if (!as.end_session_endpoint) return undefined;
  const url = new URL(as.end_session_endpoint);
  url.searchParams.set("client_id", config.client_id);
  return url.href;
}
