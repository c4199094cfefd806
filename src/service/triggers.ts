import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Cron } from "croner";
import { TriggerSchema, type Trigger } from "../../gen/platform/v1/trigger_pb.js";
import { newId } from "../lib/ids.js";
import type { TriggerRow } from "../store/rows.js";
import { invalidArgument, notFound } from "./errors.js";
import { checkEventTypePattern } from "./event-pattern.js";
import { checkJsonata } from "./expressions.js";
import { applyUpdateMask } from "./field-mask.js";
import { tenantOf, times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";
import { MAX_LENGTH } from "./limits.js";
import { insertWithinQuota } from "./quotas.js";
import { checkLength, requireId } from "./validate.js";

const UPDATABLE = ["agent_id", "enabled", "webhook", "schedule", "manual"] as const;

function triggerMessage(row: TriggerRow): Trigger {
  const kind: MessageInitShape<typeof TriggerSchema>["kind"] =
    row.kind === "webhook"
      ? { case: "webhook", value: { sourceId: row.sourceId ?? "", eventTypePattern: row.eventTypePattern ?? "", filter: row.filter ?? "" } }
      : row.kind === "schedule"
        ? { case: "schedule", value: { cron: row.cron ?? "", timezone: row.timezone ?? "" } }
        : { case: "manual", value: {} };
  return create(TriggerSchema, {
    id: row.id,
    agentId: row.agentId,
    enabled: row.enabled,
    kind,
    ...times(row),
    filterError: row.filterError ?? "",
    filterErrorTime: row.filterErrorTime === null ? undefined : timestampFromMs(row.filterErrorTime),
  });
}

function checkTimezone(zone: string): string {
  if (!zone) return "";
  checkLength("trigger.schedule.timezone", zone, MAX_LENGTH.timezone);
  try {
    new Intl.DateTimeFormat("en", { timeZone: zone });
  } catch {
    throw invalidArgument("trigger.schedule.timezone", `"${zone}" is not an IANA time zone`);
  }
  return zone;
}

// Slots sampled for the shortest interval: two minutes of a schedule that
// fires every second, so every seconds pattern shows its shortest gap
// (within a minute, or across into the next), and the minute and hour
// patterns of slower ones theirs.
const SAMPLED_SLOTS = 121;
// A fixed start (a minute boundary, no DST shift near it): the same
// expression always gets the same answer.
const SAMPLE_FROM = new Date(Date.UTC(2026, 0, 5) - 1);

// The shortest time between two of the next slots, in ms.
function shortestGap(cron: Cron): number {
  const slots = cron.nextRuns(SAMPLED_SLOTS, SAMPLE_FROM).map((d) => d.getTime());
  let gap = Infinity;
  for (let i = 1; i < slots.length; i++) gap = Math.min(gap, slots[i]! - slots[i - 1]!);
  return gap;
}

function checkCron(expr: string, timezone: string, minIntervalSeconds: number): string {
  if (!expr.trim()) throw invalidArgument("trigger.schedule.cron", "is required");
  checkLength("trigger.schedule.cron", expr, MAX_LENGTH.cron);
  let cron: Cron;
  try {
    cron = new Cron(expr, { paused: true, timezone: timezone || undefined });
  } catch (err) {
    throw invalidArgument("trigger.schedule.cron", `"${expr}": ${(err as Error).message}`);
  }
  const gap = shortestGap(cron);
  if (gap < minIntervalSeconds * 1000)
    throw invalidArgument(
      "trigger.schedule.cron",
      `"${expr}" fires ${gap / 1000} s apart; schedules fire at most once every ${minIntervalSeconds} s (AGENTPLANE_SCHEDULE_MIN_INTERVAL_SECONDS)`,
    );
  return expr;
}

export function triggerHandlers({ store, now, quotas, scheduleMinIntervalSeconds }: ServiceDeps) {
  async function columns(tenantId: string, trigger: Trigger) {
    const agentId = requireId("trigger.agent_id", trigger.agentId, "agt");
    if (!(await store.agents.get(tenantId, agentId)))
      throw invalidArgument("trigger.agent_id", `agent "${agentId}" not found`);
    const none = { sourceId: null, eventTypePattern: null, filter: null, cron: null, timezone: null };
    const base = { agentId, enabled: trigger.enabled ?? true };
    const kind = trigger.kind;
    switch (kind.case) {
      case "webhook": {
        const sourceId = kind.value.sourceId || null;
        if (sourceId) {
          requireId("trigger.webhook.source_id", sourceId, "src");
          if (!(await store.webhookSources.get(tenantId, sourceId)))
            throw invalidArgument("trigger.webhook.source_id", `webhook source "${sourceId}" not found`);
        }
        return {
          ...base,
          ...none,
          kind: "webhook" as const,
          sourceId,
          eventTypePattern: checkEventTypePattern("trigger.webhook.event_type_pattern", kind.value.eventTypePattern),
          filter: checkJsonata("trigger.webhook.filter", kind.value.filter, MAX_LENGTH.filter) || null,
        };
      }
      case "schedule": {
        const timezone = checkTimezone(kind.value.timezone);
        return { ...base, ...none, kind: "schedule" as const, cron: checkCron(kind.value.cron, timezone, scheduleMinIntervalSeconds), timezone: timezone || null };
      }
      case "manual":
        return { ...base, ...none, kind: "manual" as const };
      default:
        throw invalidArgument("trigger", "one of webhook, schedule or manual is required");
    }
  }

  async function find(tenantId: string, id: string): Promise<TriggerRow> {
    const row = await store.triggers.get(tenantId, id);
    if (!row) throw notFound("trigger", id);
    return row;
  }

  return {
    async listTriggers(req, call) {
      const tenant = tenantOf(call);
      const q = pageQuery(req);
      const rows = await store.triggers.list(tenant.id, { ...q, where: { agentId: req.agentId || undefined } });
      const { items, nextPageToken } = page(rows, q.limit);
      return { triggers: items.map((r) => ({ ...triggerMessage(r), tenant: tenant.slug })), nextPageToken };
    },
    async getTrigger({ id }, call) {
      const tenant = tenantOf(call);
      return { trigger: { ...triggerMessage(await find(tenant.id, id)), tenant: tenant.slug } };
    },
    async createTrigger({ trigger }, call) {
      const tenant = tenantOf(call);
      const t = now();
      const cols = await columns(tenant.id, trigger ?? create(TriggerSchema));
      const row = await insertWithinQuota(
        store.triggers,
        { id: newId("trg"), tenantId: tenant.id, ...cols, createTime: t, updateTime: t },
        tenant,
        quotas,
        "triggers",
      );
      return { trigger: { ...triggerMessage(row), tenant: tenant.slug } };
    },
    async updateTrigger({ trigger, updateMask }, call) {
      const tenant = tenantOf(call);
      if (!trigger?.id) throw invalidArgument("trigger.id", "is required");
      const row = await find(tenant.id, trigger.id);
      const { merged } = applyUpdateMask(TriggerSchema, triggerMessage(row), trigger, updateMask, UPDATABLE);
      const cols = await columns(tenant.id, merged);
      const updated = await store.triggers.update(tenant.id, row.id, { ...cols, filterError: null, filterErrorTime: null, updateTime: now() });
      if (!updated) throw notFound("trigger", trigger.id);
      return { trigger: { ...triggerMessage(updated), tenant: tenant.slug } };
    },
    async deleteTrigger({ id }, call) {
      const tenant = tenantOf(call);
      if (!(await store.triggers.delete(tenant.id, id))) throw notFound("trigger", id);
      return {};
    },
  } satisfies Partial<PlatformHandlers>;
}
