// Why a skill call failed, in words a run step can carry: `kind` is stable
// for programs, `message` says which step went wrong.
export const SKILL_ERROR_KINDS = [
  "skill_unauthorized", // the server refused our credentials
  "skill_rejected", // the server answered another 4xx: a wrong URL or not an MCP endpoint
  "skill_auth_failed", // OAuth discovery or token request failed
  "outbound_blocked", // the URL resolves to an address we may not call
  "skill_unreachable", // connection refused, DNS, reset: transient
  "skill_timeout", // transient
  "skill_error", // the server answered 5xx or broke the protocol: transient
  "skill_response_too_large", // past AGENTPLANE_SKILL_MAX_RESPONSE_BYTES: the same call would answer the same
  "tool_error", // the tool ran and reported an error (isError)
] as const;

export type SkillErrorKind = (typeof SKILL_ERROR_KINDS)[number];

const TRANSIENT: SkillErrorKind[] = ["skill_unreachable", "skill_timeout", "skill_error"];

export class SkillError extends Error {
  override name = "SkillError";

  constructor(
    readonly kind: SkillErrorKind,
    message: string,
    readonly step?: string,
  ) {
    super(step ? `${kind} (${step}): ${message}` : `${kind}: ${message}`);
  }

  get transient(): boolean {
    return TRANSIENT.includes(this.kind);
  }
}
