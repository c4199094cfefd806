import type { FetchLike } from "../outbound/guarded-fetch.js";
import { jsonReason } from "../outbound/upstream-reason.js";
import { SkillError } from "./errors.js";
import { parseBearerChallenge, type OAuthSession } from "./oauth.js";

export type SkillAuth =
  | { mode: "none" }
  | { mode: "static_bearer"; token: string }
  | { mode: "headers"; headers: Record<string, string> }
  | { mode: "oauth"; session: OAuthSession };

function withAuthorization(init: RequestInit | undefined, token: string): RequestInit {
  const headers = new Headers(init?.headers);
  headers.set("authorization", `Bearer ${token}`);
  return { ...init, headers };
}

// A refusal is `skill_unauthorized`, with the server's JSON-RPC error when it
// sent one (the seed's `-32000 Unauthorized` for a static token mismatch);
// any other body is left out (see upstream-reason.ts).
async function unauthorized(res: Response, what: string): Promise<SkillError> {
  const reason = jsonReason(await res.text().catch(() => ""));
  return new SkillError("skill_unauthorized", `${what}: HTTP ${res.status}${reason ? ` (JSON-RPC error ${reason})` : ""}`);
}

// The fetch the MCP SDK client uses for one skill: it adds the skill's
// credentials and does the OAuth dance itself (the SDK 1.x client neither
// checks the metadata's resource and issuer nor a cached token's expiry),
// retrying once; credentials never go into headers the token endpoint sees.
export function authenticatedFetch(base: FetchLike, auth: SkillAuth): FetchLike {
  switch (auth.mode) {
    case "none":
      return base;
    case "static_bearer":
      return async (url, init) => {
        const res = await base(url, withAuthorization(init, auth.token));
        if (res.status === 401) throw await unauthorized(res, "the server refused the static bearer token");
        return res;
      };
    case "headers":
      return async (url, init) => {
        const headers = new Headers(init?.headers);
        for (const [name, value] of Object.entries(auth.headers)) headers.set(name, value);
        const res = await base(url, { ...init, headers });
        if (res.status === 401) throw await unauthorized(res, "the server refused the configured headers");
        return res;
      };
    case "oauth":
      return async (url, init) => {
        const { session } = auth;
        const cached = session.cached();
        let res = await base(url, cached ? withAuthorization(init, cached) : init);
        if (res.status === 401) {
          // No token yet, or the cached one was refused: authenticate once.
          const challenge = parseBearerChallenge(res.headers.get("www-authenticate"));
          await res.body?.cancel();
          session.invalidate();
          const token = await session.authenticate(challenge);
          res = await base(url, withAuthorization(init, token));
          if (res.status === 401) throw await unauthorized(res, "the server refused a fresh OAuth token");
        }
        if (res.status === 403) {
          const challenge = parseBearerChallenge(res.headers.get("www-authenticate"));
          if (challenge?.error !== "insufficient_scope") return res;
          await res.body?.cancel();
          const token = await session.stepUp(challenge);
          res = await base(url, withAuthorization(init, token));
          if (res.status === 403 || res.status === 401)
            throw await unauthorized(res, `the server wants scope "${challenge.scope ?? "?"}", which the token request did not grant`);
        }
        return res;
      };
  }
}
