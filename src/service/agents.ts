import { create, toJson } from "@bufbuild/protobuf";
import { ValueSchema, durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";
import { AgentSchema, type Agent } from "../../gen/platform/v1/agent_pb.js";
import { newId } from "../lib/ids.js";
import { currentTraceParent } from "../lib/tracing.js";
import { queuedRun } from "../store/queued-run.js";
import type { AgentRow, AgentSpec, SkillRow } from "../store/rows.js";
import { failedPrecondition, invalidArgument, nameTaken, notFound, onConflict } from "./errors.js";
import { checkHttpUrl, checkJsonata } from "./expressions.js";
import { applyUpdateMask } from "./field-mask.js";
import { tenantOf, times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";
import { runMessage } from "./runs.js";
import { nestsDeeperThan } from "./json-depth.js";
import { MAX_COUNT, MAX_LENGTH } from "./limits.js";
import { insertWithinQuota, quotaError } from "./quotas.js";
import { checkCount, checkLength, optionalText, requireId, requireText } from "./validate.js";
import { checkStepArguments } from "./step-arguments.js";
import { checkHeaderValue } from "./skill-auth.js";

const DEFAULT_MAX_STEPS = 16;
const MAX_MAX_STEPS = 256;
const DEFAULT_TIMEOUT_MS = 120_000;
const MAX_TIMEOUT_MS = 3_600_000;
const MAX_MAX_CONCURRENT_RUNS = 1000;
const UPDATABLE = [
  "name", "description", "instructions", "skill_ids", "allowed_tools", "steps", "model", "max_steps", "timeout", "enabled",
  "max_concurrent_runs",
] as const;

// Budget of one step's arguments evaluated on the sample context at save.
const SAMPLE_BUDGET_MS = 50;
// Tool names a refusal lists before "…".
const LISTED_TOOLS = 20;

export const agentSecretContext = (id: string) => `agent:${id}:model.api_key`;

function agentMessage(row: AgentRow): Agent {
  const { spec } = row;
  return create(AgentSchema, {
    id: row.id,
    name: row.name,
    description: row.description,
    instructions: row.instructions,
    skillIds: spec.skillIds,
    allowedTools: Object.fromEntries(Object.entries(spec.allowedTools).map(([k, tools]) => [k, { tools }])),
    steps: spec.steps,
    model: spec.model && { baseUrl: spec.model.baseUrl, model: spec.model.model, apiKeySet: row.modelApiKey !== null },
    maxSteps: row.maxSteps,
    timeout: durationFromMs(row.timeoutMs),
    enabled: row.enabled,
    maxConcurrentRuns: row.maxConcurrentRuns ?? undefined,
    ...times(row),
  });
}

export function agentHandlers({ store, secrets, now, onRunsQueued, quotas, jsonMaxDepth, sandbox }: ServiceDeps) {
  // What can be known at save time of whether the plan can run: a plan or a
  // model, tools the skills list, arguments their input schemas can accept
  // (see step-arguments.ts). Skills never listed are not judged.
  async function checkPlan(tenantId: string, agent: Agent, steps: AgentSpec["steps"], skills: Map<string, SkillRow>) {
    if (!steps.length && !agent.model)
      throw invalidArgument("agent.steps", "set steps (a deterministic plan) or a model; an agent with neither has nothing to run");
    for (const [i, step] of steps.entries()) {
      const skill = skills.get(step.skillId)!;
      if (skill.toolsRefreshTime === null) continue;
      const tool = skill.tools.find((t) => t.name === step.tool);
      if (!tool) {
        const names = skill.tools.slice(0, LISTED_TOOLS).map((t) => t.name).join(", ") + (skill.tools.length > LISTED_TOOLS ? ", …" : "");
        throw invalidArgument(
          `agent.steps[${i}].tool`,
          `skill "${skill.name}" has no tool "${step.tool}" (listed: ${names || "none"}); ` +
            `if the server has it now, the stored list is stale: refresh it with RefreshSkillTools (POST /api/v1/skills/${skill.id}/refresh-tools)`,
        );
      }
      // Earlier steps' results are unknown here; each is an empty object.
      const sample = {
        event: { id: "evt_sample", event_type: "sample", payload: {}, source_id: "src_sample", receive_time: new Date(0).toISOString() },
        input: {},
        steps: steps.slice(0, i).map(() => ({ result: {} })),
      };
      await checkStepArguments({
        field: `agent.steps[${i}].arguments`,
        tool: step.tool,
        expression: step.arguments,
        inputSchema: tool.inputSchema as Record<string, unknown>,
        evaluate: async () => (await sandbox.evaluate(tenantId, [step.arguments], sample, SAMPLE_BUDGET_MS, "value"))[0]!,
      });
    }
  }

  // Validates an agent as a whole and returns the columns it is stored as;
  // `plan`: also judge whether its plan can run (a create, or an update of
  // its steps, model or skills).
  async function columns(tenantId: string, agent: Agent, id: string, previousKey: string | null, plan: boolean) {
    checkCount("agent.skill_ids", agent.skillIds, MAX_COUNT.skillIds);
    const skillIds = [...new Set(agent.skillIds)];
    const skills = new Map<string, SkillRow>();
    for (const [i, skillId] of skillIds.entries()) {
      requireId(`agent.skill_ids[${i}]`, skillId, "skl");
      const skill = await store.skills.get(tenantId, skillId);
      if (!skill) throw invalidArgument(`agent.skill_ids[${i}]`, `skill "${skillId}" not found`);
      skills.set(skillId, skill);
    }
    checkCount("agent.allowed_tools", Object.keys(agent.allowedTools), MAX_COUNT.allowedToolSkills);
    for (const [skillId, list] of Object.entries(agent.allowedTools)) {
      if (!skillIds.includes(skillId)) throw invalidArgument("agent.allowed_tools", `"${skillId}" is not in skill_ids`);
      const field = `agent.allowed_tools["${skillId}"].tools`;
      checkCount(field, list.tools, MAX_COUNT.allowedTools);
      list.tools.forEach((tool, i) => checkLength(`${field}[${i}]`, tool, MAX_LENGTH.toolName));
    }
    checkCount("agent.steps", agent.steps, MAX_COUNT.steps);
    const steps = agent.steps.map((s, i) => {
      if (!skillIds.includes(s.skillId)) throw invalidArgument(`agent.steps[${i}].skill_id`, `"${s.skillId}" is not in skill_ids`);
      return {
        skillId: s.skillId,
        tool: requireText(`agent.steps[${i}].tool`, s.tool, MAX_LENGTH.toolName),
        arguments: checkJsonata(`agent.steps[${i}].arguments`, s.arguments, MAX_LENGTH.stepArguments),
      };
    });
    let model: AgentSpec["model"];
    let modelApiKey: string | null = null;
    if (agent.model) {
      if (steps.length) throw invalidArgument("agent", "set either steps (deterministic) or model, not both");
      const baseUrl = checkHttpUrl("agent.model.base_url", agent.model.baseUrl);
      // Paths are appended to it; behind a `?` they would become the query.
      if (baseUrl.href.includes("?")) throw invalidArgument("agent.model.base_url", "must not have a query (?)");
      model = {
        baseUrl: baseUrl.toString(),
        model: requireText("agent.model.model", agent.model.model, MAX_LENGTH.modelName),
      };
      // Sent as `Authorization: Bearer <key>`.
      checkHeaderValue("agent.model.api_key", agent.model.apiKey);
      modelApiKey = agent.model.apiKey ? secrets.seal(agent.model.apiKey, agentSecretContext(id)) : previousKey;
    }
    if (agent.maxSteps < 0 || agent.maxSteps > MAX_MAX_STEPS)
      throw invalidArgument("agent.max_steps", `must be between 1 and ${MAX_MAX_STEPS}`);
    const timeoutMs = agent.timeout ? durationMs(agent.timeout) : DEFAULT_TIMEOUT_MS;
    if (timeoutMs <= 0 || timeoutMs > MAX_TIMEOUT_MS) throw invalidArgument("agent.timeout", "must be between 1 ms and 1 h");
    const maxConcurrentRuns = agent.maxConcurrentRuns ?? 0;
    if (maxConcurrentRuns < 0 || maxConcurrentRuns > MAX_MAX_CONCURRENT_RUNS)
      throw invalidArgument("agent.max_concurrent_runs", `must be between 0 (no limit) and ${MAX_MAX_CONCURRENT_RUNS}`);
    const cols = {
      name: requireText("agent.name", agent.name, MAX_LENGTH.name),
      description: optionalText("agent.description", agent.description, MAX_LENGTH.description),
      instructions: optionalText("agent.instructions", agent.instructions, MAX_LENGTH.instructions),
      spec: {
        skillIds,
        allowedTools: Object.fromEntries(Object.entries(agent.allowedTools).map(([k, v]) => [k, v.tools])),
        steps,
        ...(model && { model }),
      },
      modelApiKey,
      maxSteps: agent.maxSteps || DEFAULT_MAX_STEPS,
      timeoutMs,
      enabled: agent.enabled ?? true,
      // Stored as null for "no limit", which the queue does not look up.
      maxConcurrentRuns: maxConcurrentRuns || null,
    };
    // Last: each field's own checks answer first, and only a well-formed plan is tried.
    if (plan) await checkPlan(tenantId, agent, steps, skills);
    return cols;
  }

  async function find(tenantId: string, id: string): Promise<AgentRow> {
    const row = await store.agents.get(tenantId, id);
    if (!row) throw notFound("agent", id);
    return row;
  }

  return {
    async listAgents(req, call) {
      const tenant = tenantOf(call);
      const q = pageQuery(req);
      const rows = await store.agents.list(tenant.id, q);
      const { items, nextPageToken } = page(rows, q.limit);
      return { agents: items.map((r) => ({ ...agentMessage(r), tenant: tenant.slug })), nextPageToken };
    },
    async getAgent({ id }, call) {
      const tenant = tenantOf(call);
      return { agent: { ...agentMessage(await find(tenant.id, id)), tenant: tenant.slug } };
    },
    async createAgent({ agent }, call) {
      const tenant = tenantOf(call);
      const id = newId("agt");
      const t = now();
      const cols = await columns(tenant.id, agent ?? create(AgentSchema), id, null, true);
      const row = await insertWithinQuota(
        store.agents,
        { id, tenantId: tenant.id, ...cols, createTime: t, updateTime: t },
        tenant,
        quotas,
        "agents",
        nameTaken("agent.name", "agent", cols.name, tenant),
      );
      return { agent: { ...agentMessage(row), tenant: tenant.slug } };
    },
    async updateAgent({ agent, updateMask }, call) {
      const tenant = tenantOf(call);
      if (!agent?.id) throw invalidArgument("agent.id", "is required");
      const row = await find(tenant.id, agent.id);
      const { merged, paths } = applyUpdateMask(AgentSchema, agentMessage(row), agent, updateMask, UPDATABLE);
      const plan = paths.some((p) => ["steps", "model", "skill_ids"].includes(p.split(".")[0]!));
      const cols = await columns(tenant.id, merged, row.id, row.modelApiKey, plan);
      const updated = await store.agents.update(tenant.id, row.id, { ...cols, updateTime: now() }).catch(onConflict(nameTaken("agent.name", "agent", cols.name, tenant)));
      if (!updated) throw notFound("agent", agent.id);
      return { agent: { ...agentMessage(updated), tenant: tenant.slug } };
    },
    async deleteAgent({ id }, call) {
      const tenant = tenantOf(call);
      const triggers = await store.triggers.list(tenant.id, { limit: 1, where: { agentId: id } });
      if (triggers.length) throw failedPrecondition(`agent "${id}" still has triggers; delete them first`);
      if (!(await store.agents.delete(tenant.id, id))) throw notFound("agent", id);
      return {};
    },
    async runAgent({ id, input }, call) {
      const tenant = tenantOf(call);
      const agent = await find(tenant.id, id);
      if (!agent.enabled) throw failedPrecondition(`agent "${id}" is disabled`);
      // A Value with no kind set (a binary client's empty message) is no input.
      const json = input && input.kind.case !== undefined ? toJson(ValueSchema, input) : null;
      if (nestsDeeperThan(json, jsonMaxDepth)) throw invalidArgument("input", `must not nest deeper than ${jsonMaxDepth} levels`);
      const rows = [queuedRun({ tenantId: tenant.id, agentId: agent.id, input: json, traceParent: currentTraceParent() }, now())];
      const queued = await store.queue.insertMany(rows, quotas.queuedRuns);
      if (!queued) throw quotaError(tenant.slug, quotas, "queuedRuns");
      onRunsQueued("run_agent", rows);
      const runId = rows[0]!.id;
      const run = await store.runs.get(tenant.id, runId);
      if (!run) throw notFound("run", runId);
      return { run: { ...runMessage(run), tenant: tenant.slug } };
    },
  } satisfies Partial<PlatformHandlers>;
}
