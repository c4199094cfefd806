import type { FetchLike } from "../outbound/guarded-fetch.js";
import { readBounded } from "../outbound/read-bounded.js";
import { clean, errorReason, jsonReason } from "../outbound/upstream-reason.js";
import { SkillError } from "./errors.js";
import { parseBearerChallenge, type OAuthSession } from "./oauth.js";

// A skill's auth as its requests carry it: the opened secrets, or for OAuth
// the live session (token cache, step-up). The family: `SkillAuth` (the API
// message), `StoredSkillAuth` (a row, secrets sealed apart),
// `OpenedSkillAuth` (secrets opened in memory), `LiveSkillAuth`.
export type LiveSkillAuth =
  | { mode: "none" }
  | { mode: "static_bearer"; token: string }
  | { mode: "headers"; headers: Record<string, string> }
  | { mode: "oauth"; session: OAuthSession };

// An error body worth reading is a line of JSON.
const MAX_ERROR_BODY = 16 * 1024;

function withAuthorization(init: RequestInit | undefined, token: string): RequestInit {
  const headers = new Headers(init?.headers);
  headers.set("authorization", `Bearer ${token}`);
  return { ...init, headers };
}

// What the server said in a shape we know: the challenge's `error` and
// `error_description` (RFC 6750 §3), and a JSON-RPC error body (the seed's
// `-32000 Unauthorized`) or an OAuth one. Any other body is left out (see
// upstream-reason.ts).
async function refusalReason(res: Response): Promise<string | undefined> {
  const challenge = parseBearerChallenge(res.headers.get("www-authenticate"));
  const fromHeader = challenge?.error ? clean(challenge.errorDescription ? `${challenge.error}: ${challenge.errorDescription}` : challenge.error) : undefined;
  const text = (await readBounded(res, MAX_ERROR_BODY).catch(() => undefined)) ?? "";
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const error = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  const rpc = typeof error === "object" && error !== null ? errorReason(error) : undefined;
  const fromBody = rpc ? `JSON-RPC error ${rpc}` : jsonReason(text);
  return [fromHeader, fromBody].filter(Boolean).join("; ") || undefined;
}

// A 401 or 403 is `skill_unauthorized` with the status and the server's reason.
async function refused(res: Response, what: string): Promise<SkillError> {
  const reason = await refusalReason(res);
  return new SkillError("skill_unauthorized", `${what}: HTTP ${res.status}${reason ? ` (${reason})` : ""}`);
}

const REFUSED_401: Record<LiveSkillAuth["mode"], string> = {
  none: "the server wants credentials and the skill has none",
  static_bearer: "the server refused the static bearer token",
  headers: "the server refused the configured headers",
  oauth: "the server refused a fresh OAuth token",
};

function oauthFetch(base: FetchLike, session: OAuthSession): FetchLike {
  return async (url, init) => {
    const cached = session.cached();
    let res = await base(url, cached ? withAuthorization(init, cached) : init);
    if (res.status === 401) {
      // No token yet, or the cached one was refused: authenticate once.
      const challenge = parseBearerChallenge(res.headers.get("www-authenticate"));
      await res.body?.cancel();
      session.invalidate();
      const token = await session.authenticate(challenge);
      res = await base(url, withAuthorization(init, token));
    }
    if (res.status === 403) {
      const challenge = parseBearerChallenge(res.headers.get("www-authenticate"));
      if (challenge?.error !== "insufficient_scope") return res;
      await res.body?.cancel();
      const token = await session.stepUp(challenge);
      res = await base(url, withAuthorization(init, token));
      if (res.status === 403 || res.status === 401)
        throw await refused(res, `the server wants scope "${clean(challenge.scope ?? "?")}", which the token request did not grant`);
    }
    return res;
  };
}

function withCredentials(base: FetchLike, auth: LiveSkillAuth): FetchLike {
  switch (auth.mode) {
    case "none":
      return base;
    case "static_bearer":
      return (url, init) => base(url, withAuthorization(init, auth.token));
    case "headers":
      return (url, init) => {
        const headers = new Headers(init?.headers);
        for (const [name, value] of Object.entries(auth.headers)) headers.set(name, value);
        return base(url, { ...init, headers });
      };
    case "oauth":
      return oauthFetch(base, auth.session);
  }
}

// The fetch the MCP SDK client uses for one skill: it adds the skill's
// credentials and does the OAuth dance itself (the SDK 1.x client neither
// checks the metadata's resource and issuer nor a cached token's expiry),
// retrying once; credentials never go into headers the token endpoint sees.
// A refusal that is left (401, 403) fails at once, never retried, with what
// the server said.
export function authenticatedFetch(base: FetchLike, auth: LiveSkillAuth): FetchLike {
  const send = withCredentials(base, auth);
  return async (url, init) => {
    const res = await send(url, init);
    if (res.status === 401) throw await refused(res, REFUSED_401[auth.mode]);
    if (res.status === 403) throw await refused(res, "the server refused the request");
    return res;
  };
}
