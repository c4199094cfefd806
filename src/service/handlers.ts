import type { ExpressionSandbox } from "../integrations/expressions/sandbox.js";
import type { MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { PlatformService } from "../../gen/platform/v1/platform_service_pb.js";
import type { SecretBox } from "../lib/secret-box.js";
import type { Store } from "../store/store.js";
import type { CallContext, CallerRoles } from "./access.js";
import type { EventMatcher } from "./event-matching.js";
import type { Quotas } from "./limits.js";
import type { WebhookLookups } from "./lookup-cache.js";
import type { RunsQueued } from "./queued-runs.js";
import type { WebhookIngestion } from "./webhooks.js";
import type { SkillPool } from "../integrations/mcp-client/skill-pool.js";

type Methods = typeof PlatformService.method;
// Unary methods; the server-streaming `Watch…` methods have stream handlers.
export type MethodName = { [K in keyof Methods]: Methods[K]["methodKind"] extends "unary" ? K : never }[keyof Methods];
export type StreamMethodName = Exclude<keyof Methods, MethodName>;

// A service implementation function: the request message and the authorized
// call, nothing of the transport.
export type Handler<K extends MethodName> = (
  req: MessageShape<Methods[K]["input"]>,
  call: CallContext,
) => Promise<MessageInitShape<Methods[K]["output"]>>;

// A streaming implementation: yields each response message until the stream
// ends or `signal` aborts (the caller went away).
export type StreamHandler<K extends StreamMethodName> = (
  req: MessageShape<Methods[K]["input"]>,
  call: CallContext,
  signal: AbortSignal,
) => AsyncIterable<MessageInitShape<Methods[K]["output"]>>;

export type PlatformHandlers = { [K in MethodName]: Handler<K> };
export type PlatformStreamHandlers = { [K in StreamMethodName]: StreamHandler<K> };


export interface ServiceDeps {
  store: Store;
  secrets: SecretBox;
  now: () => number;
  matcher: EventMatcher;
  lookups: WebhookLookups;
  // Connections to customer MCP servers.
  skills: SkillPool;
  // Runs were committed to the queue: wake the workers, log them.
  onRunsQueued: RunsQueued;
  // A run was cancelled: stop it now if it is executing here.
  onRunCancelled: (runId: string) => void;
  quotas: Quotas;
  // Deepest nesting of a JSON value a tenant sends (run input).
  jsonMaxDepth: number;
  // Shortest interval between two slots of a schedule trigger.
  scheduleMinIntervalSeconds: number;
  // Events in as a webhook brings them (validation, matching, quota, runs).
  webhooks: WebhookIngestion;
  // The caller's own standing, for caller operations.
  roles: CallerRoles;
  // Where tenant JSONata runs (a plan's arguments tried on a sample at save).
  sandbox: ExpressionSandbox;
  // Where the service is reached from outside (a signed source's URL).
  publicUrl: string;
}

// Tenant operations always have a tenant once authorized.
export function tenantOf(call: CallContext): { id: string; slug: string } {
  if (!call.tenant) throw new Error("tenant operation called without a tenant");
  return call.tenant;
}

export function times(row: { createTime: number; updateTime: number }) {
  return { createTime: timestampFromMs(row.createTime), updateTime: timestampFromMs(row.updateTime) };
}
