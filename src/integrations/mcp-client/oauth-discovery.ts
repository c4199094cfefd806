import { buildDiscoveryUrls } from "@modelcontextprotocol/sdk/client/auth.js";
import type { FetchLike } from "../outbound/guarded-fetch.js";
import { readBounded } from "../outbound/read-bounded.js";
import { clean } from "../outbound/upstream-reason.js";
import { SkillError } from "./errors.js";

// Metadata documents are a few kilobytes; a bigger answer at a well-known
// path is something else (an application's HTML page) and is not read on.
export const MAX_DOCUMENT_BYTES = 64 * 1024;

export const authFailed = (step: string, message: string) => new SkillError("skill_auth_failed", message, step);

type Found = { doc: Record<string, unknown> } | { missing: string };

// One candidate location. A 4xx, an unfollowed redirect, an oversized or
// non-JSON answer mean "not here" (servers answer a path they do not serve
// with 404, 401 from a catch-all guard, or an HTML page); a 5xx, a timeout
// or a refused connection end the search, since the next location is on the
// same broken server.
async function fetchDocument(fetch: FetchLike, url: string, timeoutMs: number, step: string): Promise<Found> {
  let res: Response;
  try {
    res = await fetch(url, { headers: { accept: "application/json" }, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw authFailed(step, `GET ${clean(url)} failed: ${(err as Error).message}`);
  }
  if (res.status >= 500) {
    await res.body?.cancel().catch(() => {});
    throw authFailed(step, `GET ${clean(url)} answered HTTP ${res.status}`);
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    return { missing: `HTTP ${res.status}` };
  }
  let text: string | undefined;
  try {
    text = await readBounded(res, MAX_DOCUMENT_BYTES);
  } catch (err) {
    throw authFailed(step, `GET ${clean(url)} failed: ${(err as Error).message}`);
  }
  if (text === undefined) return { missing: `is larger than ${MAX_DOCUMENT_BYTES / 1024} KiB` };
  try {
    const doc: unknown = JSON.parse(text);
    if (typeof doc === "object" && doc !== null && !Array.isArray(doc)) return { doc: doc as Record<string, unknown> };
  } catch {
    // Said below, with the other places looked at.
  }
  return { missing: "is not a JSON object" };
}

type Search = { doc: Record<string, unknown>; url: string } | { looked: string[]; refused: boolean };

// The first of `urls` that holds a document `accept` takes; else every place
// looked at and what was there, and whether any held a document refused.
async function search(
  fetch: FetchLike,
  urls: string[],
  timeoutMs: number,
  step: string,
  accept: (doc: Record<string, unknown>, url: string) => string | undefined,
): Promise<Search> {
  const looked: string[] = [];
  let refused = false;
  for (const url of urls) {
    const found = await fetchDocument(fetch, url, timeoutMs, step);
    const refusal = "doc" in found ? accept(found.doc, url) : found.missing;
    if (refusal === undefined) return { doc: (found as { doc: Record<string, unknown> }).doc, url };
    refused ||= "doc" in found;
    looked.push(`${clean(url)} ${refusal}`);
  }
  return { looked, refused };
}

// The resource a skill URL identifies (RFC 8707 §2, as the MCP authorization
// spec's canonical server URI): without query and fragment.
function resourceOf(mcpUrl: string): URL {
  const url = new URL(mcpUrl);
  url.search = "";
  url.hash = "";
  return url;
}

const withoutSlash = (path: string) => path.replace(/\/+$/, "");

// Whether metadata naming `claimed` describes the skill at `mcpUrl`: the
// skill's resource itself (with or without its query, a trailing slash
// aside), or a parent of it on the same origin, as the root well-known
// document of a server names its whole origin (RFC 9728 §3.1; the MCP SDK
// client accepts the same). Tokens are only ever sent to the skill's origin.
export function describes(claimed: unknown, mcpUrl: string): boolean {
  if (typeof claimed !== "string" || !URL.canParse(claimed)) return false;
  const resource = new URL(claimed);
  const skill = new URL(mcpUrl);
  if (resource.hash || resource.origin !== skill.origin) return false;
  if (resource.search) return resource.search === skill.search && withoutSlash(resource.pathname) === withoutSlash(skill.pathname);
  return `${withoutSlash(skill.pathname)}/`.startsWith(`${withoutSlash(resource.pathname)}/`);
}

// Where a protected resource's metadata may be, in the order of the MCP
// authorization specification (2025-06-18, 2025-11-25): the 401 challenge's
// `resource_metadata`, the RFC 9728 path-inserted well-known URL, the root
// one; then the seed's `{mcp_url}/.well-known/oauth-protected-resource`.
function resourceMetadataUrls(mcpUrl: string, fromChallenge: string | undefined): string[] {
  const resource = resourceOf(mcpUrl);
  const path = withoutSlash(resource.pathname);
  const wellKnown = `${resource.origin}/.well-known/oauth-protected-resource`;
  const challenge = fromChallenge && URL.canParse(fromChallenge, resource.href) ? new URL(fromChallenge, resource).href : undefined;
  return [...new Set([challenge, `${wellKnown}${path}`, wellKnown, `${resource.origin}${path}/.well-known/oauth-protected-resource`])].filter(
    (url): url is string => url !== undefined,
  );
}

export interface ResourceMetadata {
  // The resource the server says it is: what tokens are requested for.
  resource: string;
  scopesSupported: string[];
  // Set when the server publishes none (an MCP 2025-03-26 server): where
  // it was looked for, for an error that has to say so.
  absent?: string[];
}

// RFC 9728 metadata for the skill, with the two checks that keep credentials
// from going anywhere else: it must describe this skill's URL, and it must
// name the configured issuer as an authorization server. A server built for
// MCP 2025-03-26 publishes none: its tokens are then asked of the configured
// issuer for the skill's URL, as the operator said (nothing was advertised
// that could send them elsewhere). A server that does speak RFC 9728 (its
// challenge names a metadata URL, or a document describes another resource)
// is still held to it.
export async function discoverResourceMetadata(
  fetch: FetchLike,
  mcpUrl: string,
  issuer: string,
  fromChallenge: string | undefined,
  timeoutMs: number,
): Promise<ResourceMetadata> {
  const step = "resource metadata";
  const found = await search(fetch, resourceMetadataUrls(mcpUrl, fromChallenge), timeoutMs, step, (doc) =>
    describes(doc.resource, mcpUrl) ? undefined : `is for resource "${clean(String(doc.resource))}"`,
  );
  if (!("doc" in found)) {
    if (found.refused || fromChallenge) throw authFailed(step, `no protected resource metadata for ${clean(mcpUrl)}: ${found.looked.join("; ")}`);
    return { resource: resourceOf(mcpUrl).href, scopesSupported: [], absent: found.looked };
  }
  const { doc, url } = found;
  const servers = Array.isArray(doc.authorization_servers) ? (doc.authorization_servers as unknown[]) : [];
  if (!servers.includes(issuer))
    throw authFailed(
      step,
      `${clean(url)} names authorization servers ${clean(JSON.stringify(servers))}, not the configured issuer ${issuer}; no credentials were sent`,
    );
  const scopes = Array.isArray(doc.scopes_supported) ? doc.scopes_supported.filter((s): s is string => typeof s === "string") : [];
  return { resource: doc.resource as string, scopesSupported: scopes };
}

export interface AuthorizationServerMetadata {
  tokenEndpoint: string;
  // `token_endpoint_auth_methods_supported`; undefined when not listed.
  authMethods?: string[];
}

// RFC 8414 metadata of the configured issuer, at the locations the MCP
// authorization specification lists in its order (the SDK's list): RFC 8414
// path-inserted, OpenID path-inserted, OpenID path-appended (the first and
// the last alone for an issuer without a path). `legacy`: the skill's server
// publishes no resource metadata (MCP 2025-03-26), where a server that is its
// own authorization server (the issuer is its origin) and publishes no
// metadata either has the default token endpoint, `<origin>/token`.
export async function discoverAuthorizationServer(
  fetch: FetchLike,
  issuer: string,
  timeoutMs: number,
  legacy?: { mcpUrl: string; absent: string[] },
): Promise<AuthorizationServerMetadata> {
  const step = "authorization server metadata";
  const urls = buildDiscoveryUrls(issuer).map(({ url }) => url.href);
  const found = await search(fetch, urls, timeoutMs, step, () => undefined);
  if (!("doc" in found)) {
    const origin = new URL(legacy?.mcpUrl ?? issuer).origin;
    if (legacy && !found.refused && withoutSlash(issuer) === origin) return { tokenEndpoint: `${origin}/token` };
    const noResource = legacy ? `; and no protected resource metadata: ${legacy.absent.join("; ")}` : "";
    throw authFailed(step, `no metadata for issuer ${issuer}: ${found.looked.join("; ")}${noResource}`);
  }
  const { doc, url } = found;
  // RFC 8414 §3.3: a document for another issuer must not be used.
  if (doc.issuer !== issuer) throw authFailed(step, `${clean(url)} describes issuer "${clean(String(doc.issuer))}", not ${issuer}`);
  if (typeof doc.token_endpoint !== "string" || !URL.canParse(doc.token_endpoint)) throw authFailed(step, `${clean(url)} has no token_endpoint`);
  const methods = doc.token_endpoint_auth_methods_supported;
  const listed = Array.isArray(methods) ? methods.filter((m): m is string => typeof m === "string") : [];
  return { tokenEndpoint: doc.token_endpoint, ...(listed.length ? { authMethods: listed } : {}) };
}
