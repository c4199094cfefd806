// The typed client of platform.v1.PlatformService and the messages it sends
// and receives, generated from proto/ (see ./gen, which is the repository's gen/).
export { ClientCredentials, type ClientAuthMethod, type ClientCredentialsOptions, type TokenSource } from "./client-credentials.js";
export { bearerAuth, tenantHeader, TENANT_HEADER } from "./interceptors.js";
export { createPlatformClient, type PlatformClient, type PlatformClientOptions, type Protocol } from "./platform-client.js";
export * from "./gen/platform/v1/agent_pb.js";
export * from "./gen/platform/v1/common_pb.js";
export * from "./gen/platform/v1/event_pb.js";
export * from "./gen/platform/v1/expression_pb.js";
export * from "./gen/platform/v1/options_pb.js";
export * from "./gen/platform/v1/overview_pb.js";
export * from "./gen/platform/v1/platform_service_pb.js";
export * from "./gen/platform/v1/run_pb.js";
export * from "./gen/platform/v1/skill_pb.js";
export * from "./gen/platform/v1/tenant_pb.js";
export * from "./gen/platform/v1/trigger_pb.js";
export * from "./gen/platform/v1/webhook_source_pb.js";
