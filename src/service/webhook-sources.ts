import { create } from "@bufbuild/protobuf";
import { durationMs, timestampFromMs, type Duration } from "@bufbuild/protobuf/wkt";
import { WebhookSourceKind, WebhookSourceSchema, type WebhookSource } from "../../gen/platform/v1/webhook_source_pb.js";
import { newId } from "../lib/ids.js";
import { newWebhookToken, webhookTokenDigest } from "../lib/webhook-token.js";
import type { WebhookSourceRow } from "../store/rows.js";
import { failedPrecondition, invalidArgument, nameTaken, notFound, onConflict } from "./errors.js";
import { eventMessage } from "./events.js";
import { checkJsonata } from "./expressions.js";
import { applyUpdateMask } from "./field-mask.js";
import { tenantOf, times, type PlatformHandlers, type ServiceDeps } from "./handlers.js";
import { page, pageQuery } from "./pagination.js";
import { MAX_LENGTH } from "./limits.js";
import { insertWithinQuota } from "./quotas.js";
import { kindName, kindValue, signingSecretFor } from "./source-kinds.js";
import { requireText } from "./validate.js";
import { signingSecretContext } from "./webhook-deliveries.js";

const UPDATABLE = ["name", "enabled", "mapping"] as const;
const DEFAULT_ROTATION_GRACE_MS = 24 * 3600_000;
const MAX_ROTATION_GRACE_MS = 30 * 24 * 3600_000;

// A new source's fields, checked without the store (see newTenantFields).
export function newWebhookSourceFields(source: { name: string; enabled?: boolean; kind?: WebhookSourceKind; mapping?: string } | undefined) {
  return {
    name: requireText("webhook_source.name", source?.name ?? "", MAX_LENGTH.name),
    enabled: source?.enabled ?? true,
    kind: kindName("webhook_source.kind", source?.kind ?? WebhookSourceKind.UNSPECIFIED),
    mapping: checkMapping(source?.mapping ?? ""),
  };
}

// Compiled when saved, as trigger filters are; empty: no mapping.
function checkMapping(mapping: string): string | null {
  return checkJsonata("webhook_source.mapping", mapping, MAX_LENGTH.mapping).trim() ? mapping : null;
}

function graceMsOf(gracePeriod: Duration | undefined): number {
  const graceMs = gracePeriod ? durationMs(gracePeriod) : DEFAULT_ROTATION_GRACE_MS;
  if (graceMs < 0 || graceMs > MAX_ROTATION_GRACE_MS) throw invalidArgument("grace_period", "must be between 0 and 30 days");
  return graceMs;
}

// `publicUrl`: where this service is reached, for a signed source's URL.
function webhookSourceMessage(row: WebhookSourceRow, now: number, publicUrl: string): WebhookSource {
  const graceLeft = (expires: number | null) => (expires !== null && expires > now ? timestampFromMs(expires) : undefined);
  const signed = row.kind !== "envelope";
  return create(WebhookSourceSchema, {
    id: row.id,
    name: row.name,
    enabled: row.enabled,
    kind: kindValue(row.kind),
    url: signed ? `${publicUrl}/webhooks/sources/${row.id}` : "",
    signingSecretSet: row.signingSecret !== null,
    mapping: row.mapping ?? "",
    previousTokenExpireTime: graceLeft(row.previousTokenExpireTime),
    previousSigningSecretExpireTime: row.previousSigningSecret === null ? undefined : graceLeft(row.previousSigningSecretExpireTime),
    ...times(row),
  });
}

export function webhookSourceHandlers({ store, now, quotas, webhooks, secrets, publicUrl }: ServiceDeps) {
  const message = (row: WebhookSourceRow, slug: string) => ({ ...webhookSourceMessage(row, now(), publicUrl), tenant: slug });

  async function find(tenantId: string, id: string): Promise<WebhookSourceRow> {
    const row = await store.webhookSources.get(tenantId, id);
    if (!row) throw notFound("webhook source", id);
    return row;
  }

  return {
    async listWebhookSources(req, call) {
      const tenant = tenantOf(call);
      const q = pageQuery(req);
      const rows = await store.webhookSources.list(tenant.id, q);
      const { items, nextPageToken } = page(rows, q.limit);
      return { webhookSources: items.map((r) => message(r, tenant.slug)), nextPageToken };
    },
    async getWebhookSource({ id }, call) {
      const tenant = tenantOf(call);
      return { webhookSource: message(await find(tenant.id, id), tenant.slug) };
    },
    async createWebhookSource({ webhookSource }, call) {
      const tenant = tenantOf(call);
      const fields = newWebhookSourceFields(webhookSource);
      const id = newId("src");
      const given = webhookSource?.signingSecret ?? "";
      // An envelope source has a token; a signed kind has a signing secret instead.
      const token = fields.kind === "envelope" ? newWebhookToken() : "";
      if (fields.kind === "envelope" && given)
        throw invalidArgument("webhook_source.signing_secret", "only signed kinds (standard_webhooks, github, stripe) have one; an envelope source has a token");
      const signing = fields.kind === "envelope" ? undefined : signingSecretFor(fields.kind, given, "webhook_source.signing_secret");
      const t = now();
      const row = await insertWithinQuota(
        store.webhookSources,
        {
          id,
          tenantId: tenant.id,
          ...fields,
          tokenDigest: token ? webhookTokenDigest(token) : null,
          signingSecret: signing ? secrets.seal(signing.secret, signingSecretContext(id)) : null,
          createTime: t,
          updateTime: t,
        },
        tenant,
        quotas,
        "webhookSources",
        nameTaken("webhook_source.name", "webhook source", fields.name, tenant),
      );
      return { webhookSource: message(row, tenant.slug), token, signingSecret: signing?.generated ? signing.secret : "" };
    },
    async updateWebhookSource({ webhookSource, updateMask }, call) {
      const tenant = tenantOf(call);
      if (!webhookSource?.id) throw invalidArgument("webhook_source.id", "is required");
      const row = await find(tenant.id, webhookSource.id);
      const masked = updateMask?.paths ?? [];
      if (masked.includes("kind") || (webhookSource.kind !== WebhookSourceKind.UNSPECIFIED && webhookSource.kind !== kindValue(row.kind)))
        throw invalidArgument("webhook_source.kind", "is set at create and cannot change; create another source");
      if (masked.includes("signing_secret") || webhookSource.signingSecret)
        throw invalidArgument("webhook_source.signing_secret", "changes only through RotateWebhookSourceSigningSecret");
      const { merged } = applyUpdateMask(WebhookSourceSchema, webhookSourceMessage(row, now(), publicUrl), webhookSource, updateMask, UPDATABLE);
      const name = requireText("webhook_source.name", merged.name, MAX_LENGTH.name);
      const updated = await store.webhookSources
        .update(tenant.id, row.id, { name, enabled: merged.enabled ?? true, mapping: checkMapping(merged.mapping), updateTime: now() })
        .catch(onConflict(nameTaken("webhook_source.name", "webhook source", name, tenant)));
      if (!updated) throw notFound("webhook source", webhookSource.id);
      return { webhookSource: message(updated, tenant.slug) };
    },
    async deleteWebhookSource({ id }, call) {
      const tenant = tenantOf(call);
      const triggers = await store.triggers.list(tenant.id, { limit: 1, where: { sourceId: id } });
      if (triggers.length) throw failedPrecondition(`webhook source "${id}" is used by trigger "${triggers[0]!.id}"`);
      if (!(await store.webhookSources.delete(tenant.id, id))) throw notFound("webhook source", id);
      return {};
    },
    async rotateWebhookSourceToken({ id, gracePeriod }, call) {
      const tenant = tenantOf(call);
      const row = await find(tenant.id, id);
      if (row.kind !== "envelope") throw failedPrecondition(`webhook source "${id}" is a ${row.kind} source with a signing secret, not a token; rotate its signing secret`);
      const graceMs = graceMsOf(gracePeriod);
      const token = newWebhookToken();
      const t = now();
      const updated = await store.webhookSources
        .update(tenant.id, row.id, {
          tokenDigest: webhookTokenDigest(token),
          previousTokenDigest: graceMs > 0 ? row.tokenDigest : null,
          previousTokenExpireTime: graceMs > 0 ? t + graceMs : null,
          updateTime: t,
        });
      if (!updated) throw notFound("webhook source", id);
      return { webhookSource: message(updated, tenant.slug), token };
    },
    // The replaced secret keeps verifying for the grace period, so the
    // provider can be switched to the new one without losing deliveries.
    async rotateWebhookSourceSigningSecret({ id, signingSecret, gracePeriod }, call) {
      const tenant = tenantOf(call);
      const row = await find(tenant.id, id);
      if (row.kind === "envelope") throw failedPrecondition(`webhook source "${id}" is an envelope source with a token, not a signing secret; rotate its token`);
      const graceMs = graceMsOf(gracePeriod);
      const next = signingSecretFor(row.kind, signingSecret, "signing_secret");
      const t = now();
      const updated = await store.webhookSources
        .update(tenant.id, row.id, {
          signingSecret: secrets.seal(next.secret, signingSecretContext(row.id)),
          previousSigningSecret: graceMs > 0 ? row.signingSecret : null,
          previousSigningSecretExpireTime: graceMs > 0 ? t + graceMs : null,
          updateTime: t,
        });
      if (!updated) throw notFound("webhook source", id);
      return { webhookSource: message(updated, tenant.slug), signingSecret: next.generated ? next.secret : "" };
    },
    // The event goes in as the source's own webhook would, past the token
    // check only: the same validation, matching, queued-runs quota and one
    // transaction for the event and its runs, and the source's rate limit
    // (the test events are that source's traffic, and a console button must
    // not be a way around the limit).
    async sendWebhookSourceTestEvent({ id, eventType, payload }, call) {
      const tenant = tenantOf(call);
      const source = await find(tenant.id, id);
      if (!source.enabled) throw failedPrecondition(`webhook source "${id}" is disabled; enable it to send events`);
      await webhooks.admit(source);
      const accepted = await webhooks.accept(source, { event_type: eventType, payload }, undefined);
      // No idempotency key, so never a duplicate.
      const matchedTriggers = accepted.duplicate ? 0 : accepted.matchedTriggers;
      const event = await store.events.get(tenant.id, accepted.eventId);
      if (!event) throw notFound("event", accepted.eventId);
      const runIds = await store.runs.idsForEvent(tenant.id, event.id);
      return { event: { ...eventMessage(event, runIds), tenant: tenant.slug }, matchedTriggers };
    },
  } satisfies Partial<PlatformHandlers>;
}
