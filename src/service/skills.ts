import { create, type JsonObject } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { SkillSchema, type Skill } from "../../gen/platform/v1/skill_pb.js";
import { secretRedactor } from "../integrations/mcp-client/secret-redaction.js";
import { newId } from "../lib/ids.js";
import { storableMessage } from "../lib/unstorable.js";
import type { SkillRow } from "../store/rows.js";
import { failedPrecondition, invalidArgument, nameTaken, notFound, onConflict } from "./errors.js";
import { checkHttpUrl } from "./expressions.js";
import { applyUpdateMask } from "./field-mask.js";
import { tenantOf, times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";
import { skillAuthColumns, skillAuthMessage, type SkillSealers } from "./skill-auth.js";
import { skillConnection, skillKeyContext, skillSecretContext } from "./skill-connection.js";
import { MAX_LENGTH } from "./limits.js";
import { insertWithinQuota } from "./quotas.js";
import { checkStorableJson, requireText } from "./validate.js";

const UPDATABLE = ["name", "mcp_url", "auth"] as const;

function skillMessage(row: SkillRow): Skill {
  return create(SkillSchema, {
    id: row.id,
    name: row.name,
    mcpUrl: row.mcpUrl,
    auth: skillAuthMessage(row.auth, row.authSecret !== null),
    tools: row.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema as JsonObject })),
    toolsRefreshTime: row.toolsRefreshTime === null ? undefined : timestampFromMs(row.toolsRefreshTime),
    toolsRefreshError: row.toolsRefreshError,
    ...times(row),
  });
}

function checkMcpUrl(value: string): string {
  const url = checkHttpUrl("skill.mcp_url", value);
  if (!url.pathname.endsWith("/mcp")) throw invalidArgument("skill.mcp_url", "path must end in /mcp");
  return url.toString();
}

export function skillHandlers({ store, secrets, now, skills, quotas }: ServiceDeps) {
  const sealers = (id: string): SkillSealers => ({
    seal: (plain) => secrets.seal(plain, skillSecretContext(id)),
    sealKey: (pem) => secrets.seal(pem, skillKeyContext(id)),
  });

  // A server's tool list is stored as it came, unless it holds characters the
  // store cannot keep: then the refresh fails, naming where.
  function storableTools(tools: unknown): void {
    try {
      checkStorableJson("tools", tools);
    } catch (err) {
      throw new Error(`the server's tool list cannot be stored: ${(err as ConnectError).rawMessage}`, { cause: err });
    }
  }

  // Lists the tools from the server and records the outcome on the skill.
  async function refresh(row: SkillRow): Promise<{ row: SkillRow; error?: string }> {
    let patch: Partial<SkillRow>;
    let error: string | undefined;
    // Shown to every viewer of the tenant: never with the skill's secrets in it.
    let redact = (text: string) => text;
    try {
      const connection = skillConnection(row, secrets);
      redact = secretRedactor(connection.auth);
      const client = await skills.connectOnce(connection);
      try {
        const tools = (await client.listTools()).map((t) => ({ name: t.name, description: t.description ?? "", inputSchema: t.inputSchema as Record<string, unknown> }));
        storableTools(tools);
        patch = {
          tools,
          toolsRefreshTime: now(),
          toolsRefreshError: "",
        };
      } finally {
        await client.close().catch(() => {});
      }
    } catch (err) {
      error = storableMessage(redact((err as Error).message));
      patch = { toolsRefreshError: error };
    }
    // The update time is left alone: a refresh is not a configuration change.
    const updated = await store.skills.update(row.tenantId, row.id, patch);
    return { row: updated ?? row, error };
  }

  async function find(tenantId: string, id: string): Promise<SkillRow> {
    const row = await store.skills.get(tenantId, id);
    if (!row) throw notFound("skill", id);
    return row;
  }

  async function usedBy(tenantId: string, skillId: string): Promise<string | undefined> {
    let beforeId: string | undefined;
    for (;;) {
      const rows = await store.agents.list(tenantId, { limit: 100, beforeId });
      const user = rows.find((a) => a.spec.skillIds.includes(skillId));
      if (user) return user.id;
      if (rows.length < 100) return undefined;
      beforeId = rows[rows.length - 1]!.id;
    }
  }

  return {
    async listSkills(req, call) {
      const tenant = tenantOf(call);
      const q = pageQuery(req);
      const rows = await store.skills.list(tenant.id, q);
      const { items, nextPageToken } = page(rows, q.limit);
      return { skills: items.map((r) => ({ ...skillMessage(r), tenant: tenant.slug })), nextPageToken };
    },
    async getSkill({ id }, call) {
      const tenant = tenantOf(call);
      return { skill: { ...skillMessage(await find(tenant.id, id)), tenant: tenant.slug } };
    },
    async createSkill({ skill }, call) {
      const tenant = tenantOf(call);
      const id = newId("skl");
      const t = now();
      const name = requireText("skill.name", skill?.name ?? "", MAX_LENGTH.name);
      const row = await insertWithinQuota(
        store.skills,
        {
          id,
          tenantId: tenant.id,
          name,
          mcpUrl: checkMcpUrl(skill?.mcpUrl ?? ""),
          ...(await skillAuthColumns(skill?.auth, sealers(id))),
          tools: [],
          createTime: t,
          updateTime: t,
        },
        tenant,
        quotas,
        "skills",
        nameTaken("skill.name", "skill", name, tenant),
      );
      // Creating never fails on an unreachable server; the outcome is recorded.
      const refreshed = await refresh(row);
      return { skill: { ...skillMessage(refreshed.row), tenant: tenant.slug } };
    },
    async updateSkill({ skill, updateMask }, call) {
      const tenant = tenantOf(call);
      if (!skill?.id) throw invalidArgument("skill.id", "is required");
      const row = await find(tenant.id, skill.id);
      const { merged, paths } = applyUpdateMask(SkillSchema, skillMessage(row), skill, updateMask, UPDATABLE);
      const mcpUrl = checkMcpUrl(merged.mcpUrl);
      const moved = new URL(mcpUrl).origin !== new URL(row.mcpUrl).origin;
      // Moving re-checks the stored auth too (the message as it reads back,
      // secrets empty), so a secret bound to the old origin is asked again.
      const auth =
        paths.includes("auth") || moved
          ? await skillAuthColumns(merged.auth, sealers(row.id), {
              spec: row.auth,
              secret: row.authSecret,
              privateKey: row.authPrivateKey,
              openSecret: () => secrets.open(row.authSecret!, skillSecretContext(row.id)),
              moved,
            })
          : { auth: row.auth, authSecret: row.authSecret, authPrivateKey: row.authPrivateKey };
      const name = requireText("skill.name", merged.name, MAX_LENGTH.name);
      const updated = await store.skills
        .update(tenant.id, row.id, { name, mcpUrl, ...auth, updateTime: now() })
        .catch(onConflict(nameTaken("skill.name", "skill", name, tenant)));
      if (!updated) throw notFound("skill", skill.id);
      return { skill: { ...skillMessage(updated), tenant: tenant.slug } };
    },
    async deleteSkill({ id }, call) {
      const tenant = tenantOf(call);
      const agentId = await usedBy(tenant.id, id);
      if (agentId) throw failedPrecondition(`skill "${id}" is used by agent "${agentId}"; remove it there first`);
      if (!(await store.skills.delete(tenant.id, id))) throw notFound("skill", id);
      return {};
    },
    async refreshSkillTools({ id }, call) {
      const tenant = tenantOf(call);
      const refreshed = await refresh(await find(tenant.id, id));
      if (refreshed.error) throw failedPrecondition(`listing tools failed: ${refreshed.error}`);
      return { skill: { ...skillMessage(refreshed.row), tenant: tenant.slug } };
    },
  } satisfies Partial<PlatformHandlers>;
}
