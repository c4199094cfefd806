// The console's only way to the server: the generated PlatformService client
// over the Connect protocol. An interceptor adds the bearer token and, for
// tenant-scoped calls, the tenant header.
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { PlatformService } from "../../gen/platform/v1/platform_service_pb.js";
import { currentSession } from "./auth.js";

export type Api = Client<typeof PlatformService>;

const TENANT_HEADER = "X-Platform-Tenant";

// Called when the server refuses the token (expired or revoked): the app
// signs in again.
let onUnauthenticated: () => void = () => {};
export function whenUnauthenticated(handler: () => void): void {
  onUnauthenticated = handler;
}

function credentials(tenant: string | undefined): Interceptor {
  return (next) => async (req) => {
    const session = currentSession();
    if (!session) {
      onUnauthenticated();
      throw new ConnectError("signed out", Code.Unauthenticated);
    }
    req.header.set("Authorization", `Bearer ${session.accessToken}`);
    if (tenant) req.header.set(TENANT_HEADER, tenant);
    try {
      return await next(req);
    } catch (err) {
      if (ConnectError.from(err).code === Code.Unauthenticated) onUnauthenticated();
      throw err;
    }
  };
}

const clients = new Map<string, Api>();

// One client per tenant ("" for caller-level calls such as ListMemberships).
export function api(tenant = ""): Api {
  let client = clients.get(tenant);
  if (!client) {
    client = createClient(
      PlatformService,
      createConnectTransport({ baseUrl: location.origin, interceptors: [credentials(tenant || undefined)] }),
    );
    clients.set(tenant, client);
  }
  return client;
}

// The service's invalid_argument messages start with the field path
// (`agent.steps[0].tool: is required`, src/service/errors.ts).
export interface ProblemMessage {
  field?: string;
  message: string;
}

export function problemOf(err: unknown): ProblemMessage {
  const e = ConnectError.from(err);
  if (e.code === Code.InvalidArgument) {
    const m = /^([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*|\[[^\]]*\])*): (.*)$/s.exec(e.rawMessage);
    if (m) return { field: m[1], message: m[2]! };
  }
  return { message: e.rawMessage || Code[e.code] };
}

export const isUnimplemented = (err: unknown) => ConnectError.from(err).code === Code.Unimplemented;
