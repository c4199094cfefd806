import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { SkillSchema, type Skill, type SkillAuth } from "../../gen/platform/v1/skill_pb.js";
import { newId } from "../lib/ids.js";
import type { SkillAuthSpec, SkillRow } from "../store/rows.js";
import { failedPrecondition, fromStoreError, invalidArgument, notFound } from "./errors.js";
import { checkHttpUrl } from "./expressions.js";
import { applyUpdateMask } from "./field-mask.js";
import { tenantOf, times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";
import { skillConnection, skillSecretContext } from "./skill-connection.js";
import { MAX_COUNT, MAX_LENGTH } from "./limits.js";
import { insertWithinQuota } from "./quotas.js";
import { checkCount, checkLength, requireText } from "./validate.js";

const UPDATABLE = ["name", "mcp_url", "auth"] as const;

export function skillMessage(row: SkillRow): Skill {
  const secretSet = row.authSecret !== null;
  const auth = row.auth;
  return create(SkillSchema, {
    id: row.id,
    name: row.name,
    mcpUrl: row.mcpUrl,
    auth: {
      mode:
        auth.mode === "static_bearer"
          ? { case: "staticBearer", value: { tokenSet: secretSet } }
          : auth.mode === "oauth"
            ? {
                case: "oauth",
                value: { issuer: auth.issuer, clientId: auth.clientId, scopes: auth.scopes, audience: auth.audience, clientSecretSet: secretSet },
              }
            : { case: "none", value: {} },
    },
    tools: row.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema as JsonObject })),
    toolsRefreshTime: row.toolsRefreshTime === null ? undefined : timestampFromMs(row.toolsRefreshTime),
    toolsRefreshError: row.toolsRefreshError,
    ...times(row),
  });
}

// Returns the stored auth shape and the sealed secret. A secret left empty on
// update keeps the stored one when the mode is unchanged, so changing scopes
// does not require resending the client secret.
function authColumns(
  auth: SkillAuth | undefined,
  seal: (plain: string) => string,
  previous?: { spec: SkillAuthSpec; secret: string | null },
): { auth: SkillAuthSpec; authSecret: string | null } {
  const mode = auth?.mode;
  const keep = (m: SkillAuthSpec["mode"]) => (previous?.spec.mode === m ? previous.secret : null);
  switch (mode?.case) {
    case undefined:
    case "none":
      return { auth: { mode: "none" }, authSecret: null };
    case "staticBearer": {
      checkLength("skill.auth.static_bearer.token", mode.value.token, MAX_LENGTH.secret);
      const secret = mode.value.token ? seal(mode.value.token) : keep("static_bearer");
      if (!secret) throw invalidArgument("skill.auth.static_bearer.token", "is required");
      return { auth: { mode: "static_bearer" }, authSecret: secret };
    }
    case "oauth": {
      const o = mode.value;
      checkLength("skill.auth.oauth.client_secret", o.clientSecret, MAX_LENGTH.secret);
      checkCount("skill.auth.oauth.scopes", o.scopes, MAX_COUNT.scopes);
      const secret = o.clientSecret ? seal(o.clientSecret) : keep("oauth");
      if (!secret) throw invalidArgument("skill.auth.oauth.client_secret", "is required");
      checkHttpUrl("skill.auth.oauth.issuer", o.issuer);
      return {
        auth: {
          mode: "oauth",
          // Kept as written: it is compared exactly with the advertised issuer.
          issuer: o.issuer,
          clientId: requireText("skill.auth.oauth.client_id", o.clientId, MAX_LENGTH.clientId),
          scopes: o.scopes.map((s, i) => requireText(`skill.auth.oauth.scopes[${i}]`, s, MAX_LENGTH.scope)),
          audience: checkLength("skill.auth.oauth.audience", o.audience, MAX_LENGTH.audience),
        },
        authSecret: secret,
      };
    }
  }
}

function checkMcpUrl(value: string): string {
  const url = checkHttpUrl("skill.mcp_url", value);
  if (!url.pathname.endsWith("/mcp")) throw invalidArgument("skill.mcp_url", "path must end in /mcp");
  return url.toString();
}

export function skillHandlers({ store, secrets, now, skills, quotas }: ServiceDeps) {
  // Lists the tools from the server and records the outcome on the skill.
  async function refresh(row: SkillRow): Promise<{ row: SkillRow; error?: string }> {
    let patch: Partial<SkillRow>;
    let error: string | undefined;
    try {
      const client = await skills.connectOnce(skillConnection(row, secrets));
      try {
        const tools = await client.listTools();
        patch = {
          tools: tools.map((t) => ({ name: t.name, description: t.description ?? "", inputSchema: t.inputSchema as Record<string, unknown> })),
          toolsRefreshTime: now(),
          toolsRefreshError: "",
        };
      } finally {
        await client.close().catch(() => {});
      }
    } catch (err) {
      error = (err as Error).message;
      patch = { toolsRefreshError: error };
    }
    // The update time is left alone: a refresh is not a configuration change.
    const updated = await store.skills.update(row.tenantId, row.id, patch).catch(fromStoreError);
    return { row: updated ?? row, error };
  }

  async function find(tenantId: string, id: string): Promise<SkillRow> {
    const row = await store.skills.get(tenantId, id).catch(fromStoreError);
    if (!row) throw notFound("skill", id);
    return row;
  }

  async function usedBy(tenantId: string, skillId: string): Promise<string | undefined> {
    let beforeId: string | undefined;
    for (;;) {
      const rows = await store.agents.list(tenantId, { limit: 100, beforeId }).catch(fromStoreError);
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
      const rows = await store.skills.list(tenant.id, q).catch(fromStoreError);
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
      const row = await insertWithinQuota(
        store.skills,
        {
          id,
          tenantId: tenant.id,
          name: requireText("skill.name", skill?.name ?? "", MAX_LENGTH.name),
          mcpUrl: checkMcpUrl(skill?.mcpUrl ?? ""),
          ...authColumns(skill?.auth, (p) => secrets.seal(p, skillSecretContext(id))),
          tools: [],
          createTime: t,
          updateTime: t,
        },
        tenant,
        quotas,
        "skills",
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
      const auth = paths.includes("auth")
        ? authColumns(merged.auth, (p) => secrets.seal(p, skillSecretContext(row.id)), { spec: row.auth, secret: row.authSecret })
        : { auth: row.auth, authSecret: row.authSecret };
      const updated = await store.skills
        .update(tenant.id, row.id, {
          name: requireText("skill.name", merged.name, MAX_LENGTH.name),
          mcpUrl: checkMcpUrl(merged.mcpUrl),
          ...auth,
          updateTime: now(),
        })
        .catch(fromStoreError);
      if (!updated) throw notFound("skill", skill.id);
      return { skill: { ...skillMessage(updated), tenant: tenant.slug } };
    },
    async deleteSkill({ id }, call) {
      const tenant = tenantOf(call);
      const agentId = await usedBy(tenant.id, id);
      if (agentId) throw failedPrecondition(`skill "${id}" is used by agent "${agentId}"; remove it there first`);
      if (!(await store.skills.delete(tenant.id, id).catch(fromStoreError))) throw notFound("skill", id);
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
