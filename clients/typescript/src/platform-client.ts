import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { PlatformService } from "./gen/platform/v1/platform_service_pb.js";
import type { TokenSource } from "./client-credentials.js";
import { bearerAuth, tenantHeader } from "./interceptors.js";

export type Protocol = "connect" | "grpc" | "grpc-web";

export interface PlatformClientOptions {
  // Where agentplane listens, e.g. https://agentplane.example.com
  baseUrl: string;
  // The tenant slug every call acts in unless it names another.
  tenant: string;
  tokens: TokenSource;
  // "connect" (HTTP/1.1, the default), "grpc" (HTTP/2; cleartext h2c for
  // http:// URLs) or "grpc-web" (HTTP/1.1): the server speaks all three.
  protocol?: Protocol;
  // Run after the token and tenant are set (logging, tracing, deadlines).
  interceptors?: Interceptor[];
}

export type PlatformClient = Client<typeof PlatformService>;

export function createPlatformClient(options: PlatformClientOptions): PlatformClient {
  const { baseUrl, protocol = "connect" } = options;
  const interceptors = [bearerAuth(options.tokens), tenantHeader(options.tenant), ...(options.interceptors ?? [])];
  const transport =
    protocol === "grpc"
      ? createGrpcTransport({ baseUrl, interceptors })
      : protocol === "grpc-web"
        ? createGrpcWebTransport({ baseUrl, httpVersion: "1.1", interceptors })
        : createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors });
  return createClient(PlatformService, transport);
}
