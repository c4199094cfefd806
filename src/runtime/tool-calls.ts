import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SkillError } from "../integrations/mcp-client/errors.js";
import type { SkillPool } from "../integrations/mcp-client/skill-pool.js";
import type { SecretBox } from "../lib/secret-box.js";
import { skillConnection } from "../service/skill-connection.js";
import type { RunStepRecord, SkillRow } from "../store/rows.js";

const BACKOFF_MS = [200, 800, 2000];

// What a step keeps of a tool result: the structured content when the tool
// gave one, else its text.
export function resultValue(result: CallToolResult): unknown {
  if (result.structuredContent) return result.structuredContent;
  const texts = result.content.filter((c) => c.type === "text").map((c) => (c as { text: string }).text);
  return texts.length === 1 ? texts[0] : texts;
}

export interface ToolCaller {
  call(skill: SkillRow, tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<RunStepRecord>;
}

// Calls a tool and returns the finished step. Transient failures (refused,
// reset, 5xx, timeout) retry with backoff while the run's budget lasts; auth,
// validation and tool errors do not.
export function createToolCaller(skills: SkillPool, secrets: SecretBox): ToolCaller {
  return {
    async call(skill, tool, args, signal) {
      const step: RunStepRecord = { kind: "tool_call", skillId: skill.id, tool, arguments: args, error: "", startTime: Date.now() };
      const connection = skillConnection(skill, secrets);
      for (let attempt = 0; ; attempt++) {
        try {
          const client = await skills.client(connection);
          const result = await client.callTool(tool, args, signal);
          step.result = resultValue(result);
          if (result.isError) step.error = new SkillError("tool_error", JSON.stringify(step.result)).message;
          break;
        } catch (err) {
          const e = err instanceof SkillError ? err : new SkillError("skill_error", (err as Error).message);
          if (e.transient) skills.evict(connection.key);
          if (!e.transient || attempt >= BACKOFF_MS.length || signal.aborted) {
            step.error = e.message;
            break;
          }
          await new Promise((r) => setTimeout(r, BACKOFF_MS[attempt]));
        }
      }
      step.endTime = Date.now();
      return step;
    },
  };
}
