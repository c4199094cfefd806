import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { TokenSource } from "./client-credentials.js";

// The header that selects the tenant a call acts in (gRPC metadata of the
// same name).
export const TENANT_HEADER = "x-platform-tenant";

// `Authorization: Bearer <token>` on every call, from the token source. A
// call the API refuses as unauthenticated drops that token, so the next call
// fetches a new one instead of repeating the refusal until it expires.
export function bearerAuth(tokens: TokenSource): Interceptor {
  return (next) => async (req) => {
    const token = await tokens.token();
    req.header.set("authorization", `Bearer ${token}`);
    try {
      return await next(req);
    } catch (err) {
      if (ConnectError.from(err).code === Code.Unauthenticated) tokens.invalidate?.(token);
      throw err;
    }
  };
}

// Names the tenant on every call that does not name one itself: a call may
// act in another tenant with `{ headers: { "x-platform-tenant": slug } }`.
export function tenantHeader(tenant: string): Interceptor {
  return (next) => (req) => {
    if (!req.header.has(TENANT_HEADER)) req.header.set(TENANT_HEADER, tenant);
    return next(req);
  };
}
