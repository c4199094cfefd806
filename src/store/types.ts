// JSON column shapes, shared by both engines' schemas.
export interface AgentSpec {
  skillIds: string[];
  allowedTools: Record<string, string[]>;
  steps: { skillId: string; tool: string; arguments: string }[];
  model?: { baseUrl: string; model: string };
}

export type StoredSkillAuth =
  | { mode: "none" }
  | { mode: "static_bearer" }
  // Header names only; the values are sealed in the row's auth secret.
  | { mode: "headers"; headers: string[] }
  | {
      mode: "oauth";
      issuer: string;
      clientId: string;
      scopes: string[];
      audience: string;
      // Absent: chosen from the authorization server's metadata.
      tokenEndpointAuthMethod?: TokenEndpointAuthMethodName;
      // The private_key_jwt key pair's public half (with kid and alg); the
      // private key is sealed in the row's authPrivateKey.
      publicJwk?: Record<string, unknown>;
    };

export type TokenEndpointAuthMethodName = "client_secret_basic" | "client_secret_post" | "private_key_jwt";

export type WebhookSourceKindName = "envelope" | "standard_webhooks" | "github" | "stripe";

export interface SkillTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export type RunStatus = "queued" | "running" | "succeeded" | "failed" | "cancelled" | "timed_out";
export const RUN_STATUSES: readonly RunStatus[] = ["queued", "running", "succeeded", "failed", "cancelled", "timed_out"];

export type StepStatus = "running" | "succeeded" | "failed";

// One try of a step's call. A retry is recorded when the try before it
// fails, with the time it is due; its real start replaces that when it begins.
export interface StepCallAttempt {
  startTime: number;
  endTime?: number;
  error: string;
}

export interface RunStepRecord {
  kind: "tool_call" | "model_call";
  skillId: string;
  tool: string;
  arguments: unknown;
  result?: unknown;
  error: string;
  startTime: number;
  endTime?: number;
  // The run's attempt that made the call, and the worker (its owner id, which
  // names the host and process) that ran it; absent in records made before
  // workers recorded them.
  attempt?: number;
  worker?: string;
  // Recorded `running` when the step starts, then completed in place; absent
  // in records made before steps were recorded at their start (those were
  // written when they ended), as are the call attempts.
  status?: StepStatus;
  callAttempts?: StepCallAttempt[];
  // What the step is across attempts (durable steps, runtime/durable-steps.ts):
  // an attempt that finds an outcome recorded under its step's key reuses
  // it. Absent in records made before steps had keys, and for steps that
  // are never reused.
  key?: string;
  // Set on a step this attempt did not execute: the attempt whose recorded
  // outcome it reused (the one that executed it).
  resumedFromAttempt?: number;
}
