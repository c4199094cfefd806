import type { FastifyRequest } from "fastify";
import type { CallerInput } from "../../service/access.js";
import { noteTenant } from "./access-log.js";

export const TENANT_HEADER = "x-platform-tenant";
// Headers a caller might use to pick an organization; the control plane
// refuses them, so they are named back in the error.
const ORG_HEADERS = ["X-Org-ID", "X-Organization-ID"];

type HeaderGetter = (name: string) => string | null | undefined;

// What every surface reads from a request: bearer token, tenant slug, and
// whether an organization header was sent. Nothing here is trusted yet.
// With `request`, the tenant the caller is authorized in goes to its access log line.
export function callerFromHeaders(get: HeaderGetter, tenantOverride?: string, request?: FastifyRequest): CallerInput {
  const authorization = get("authorization") ?? "";
  const match = /^Bearer[ ]+([^ ]+)[ ]*$/i.exec(authorization);
  return {
    token: match?.[1],
    tenant: tenantOverride ?? get(TENANT_HEADER) ?? undefined,
    orgHeader: ORG_HEADERS.find((h) => get(h.toLowerCase()) != null),
    onTenant: request && ((tenant) => noteTenant(request, tenant)),
  };
}

// Adapts Node's IncomingHttpHeaders (Fastify) to the getter.
export function nodeHeaderGetter(headers: Record<string, string | string[] | undefined>): HeaderGetter {
  return (name) => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
}
