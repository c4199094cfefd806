import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SpanKind } from "@opentelemetry/api";
import { SkillError } from "../integrations/mcp-client/errors.js";
import type { SkillPool } from "../integrations/mcp-client/skill-pool.js";
import { secretRedactor } from "../integrations/mcp-client/secret-redaction.js";
import type { CallTries } from "../lib/call-tries.js";
import { NO_OBSERVER, type Observer } from "../lib/observer.js";
import type { SecretBox } from "../lib/secret-box.js";
import { ATTR, failed, inSpan } from "../lib/tracing.js";
import { skillConnection } from "../service/skill-connection.js";
import type { SkillRow } from "../store/rows.js";

const BACKOFF_MS = [200, 800, 2000];

// What a step keeps of a tool result: the structured content when the tool
// gave one, else its text.
function resultValue(result: CallToolResult): unknown {
  if (result.structuredContent) return result.structuredContent;
  const texts = result.content.filter((c) => c.type === "text").map((c) => (c as { text: string }).text);
  return texts.length === 1 ? texts[0] : texts;
}

export interface ToolOutcome {
  result?: unknown;
  error: string;
}

export interface ToolCaller {
  // `idempotencyKey` goes with every try (see idempotency-keys.ts).
  call(skill: SkillRow, tool: string, args: Record<string, unknown>, idempotencyKey: string, signal: AbortSignal, tries: CallTries): Promise<ToolOutcome>;
}

// Calls a tool and returns its outcome. Transient failures (refused, reset,
// 5xx, timeout) retry with backoff while the run's budget lasts, each failed
// try reported to `tries`, which waits out the backoff; auth, validation and
// tool errors do not retry.
export function createToolCaller(skills: SkillPool, secrets: SecretBox, observer: Observer = NO_OBSERVER): ToolCaller {
  return {
    async call(skill, tool, args, idempotencyKey, signal, tries) {
      const connection = skillConnection(skill, secrets);
      // Step errors are kept, shown and logged: never with the skill's secrets in them.
      const redact = secretRedactor(connection.auth);
      for (let attempt = 0; ; attempt++) {
        const started = performance.now();
        const took = () => (performance.now() - started) / 1000;
        try {
          // One span per try; the customer's server gets its traceparent.
          const result = await inSpan(
            `tools/call ${tool}`,
            { kind: SpanKind.CLIENT, attributes: { [ATTR.skill]: skill.id, [ATTR.tool]: tool, "mcp.method.name": "tools/call" } },
            async (span) => {
              const client = await skills.client(connection);
              // After connecting, which may take round trips: as near the call as can be.
              await tries.ready(signal);
              const result = await client.callTool(tool, args, idempotencyKey, signal);
              if (result.isError) failed(span, "tool_error");
              observer.skillCall(skill.tenantId, result.isError ? "tool_error" : "ok", took());
              return result;
            },
            (err) => (err instanceof SkillError ? err.kind : "skill_error"),
          );
          const value = resultValue(result);
          return { result: value, error: result.isError ? redact(new SkillError("tool_error", JSON.stringify(value)).message) : "" };
        } catch (err) {
          const e = err instanceof SkillError ? err : new SkillError("skill_error", (err as Error).message);
          observer.skillCall(skill.tenantId, e.kind, took());
          if (e.transient) skills.evict(connection.key);
          const error = redact(e.message);
          if (!e.transient || attempt >= BACKOFF_MS.length || signal.aborted) return { error };
          // A cancelled run does not wait out the backoff: the next try fails at once on the aborted signal.
          await tries.backoff(error, BACKOFF_MS[attempt]!, signal);
        }
      }
    },
  };
}
