import { createHash } from "node:crypto";
import { stringify } from "safe-stable-stringify";

// The idempotency key a tools/call carries (SPEC §5): the same on every try
// of the call and on every attempt of the run, so a customer's server can
// tell a repeat from a new call. A hash of what identifies the step: opaque
// (no tenant, run or skill id reaches the server) and of fixed length.
const hashOf = (parts: unknown[]) => createHash("sha256").update(stringify(parts)).digest("base64url");

// The same hash names a step across attempts (./durable-steps.ts).
export const stepHash = hashOf;

// A plan step is the same step on every attempt whatever its arguments
// evaluate to then (an expression may read the time or an earlier result):
// its place in the plan and what it calls.
export function planStepKey(runId: string, index: number, skillId: string, tool: string): string {
  return hashOf(["plan", runId, index, skillId, tool]);
}

// A model agent's calls, keyed by what they are, not by where they come: a
// re-run attempt asks the model again, which may call other tools or in
// another order, so the n-th call of one attempt need not be the n-th of the
// next. The same tool with the same arguments (key order aside) is the same
// call; the k-th repeat within one attempt is a call of its own, and the
// k-th repeat on the next attempt is that call again. One per run attempt.
export function modelCallKeys(runId: string): (skillId: string, tool: string, args: Record<string, unknown>) => string {
  const seen = new Map<string, number>();
  return (skillId, tool, args) => {
    const call = stringify([skillId, tool, args]);
    const repeat = seen.get(call) ?? 0;
    seen.set(call, repeat + 1);
    return hashOf(["model", runId, call, repeat]);
  };
}
