import { create } from "@bufbuild/protobuf";
import { WebhookSourceSchema } from "../../gen/platform/v1/webhook_source_pb.js";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { webhookTokenDigest } from "../lib/webhook-token.js";
import type { Platform } from "../service/platform.js";
import type { Store } from "../store/store.js";

export interface DevWebhookSource {
  id: string;
  token: string;
}

// The `dev` webhook source of tenant `dev`, whose token every start of
// `agentplane dev` prints in a ready `curl`. The store keeps only the token's
// digest, so the token itself is kept in the data dir (mode 0600, beside the
// secret key and the dev client's secret): rotating it on every start instead
// would break whatever a developer pointed at it (a script, a tunnel
// forwarding a provider's webhooks) at each restart. Created on first start,
// created again if deleted, and rotated (the old token kept for the default
// grace period) if it was rotated elsewhere or its token is not kept, so the banner never prints a
// token that does not work.
export async function ensureDevWebhookSource(store: Store, platform: Platform, dataDir: string): Promise<DevWebhookSource> {
  const file = join(dataDir, "dev-webhook-source.json");
  const kept = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Partial<DevWebhookSource>) : {};
  const tenant = (await store.tenants.get("dev"))!;
  // Without its kept id (the file lost), the source by its name, which is
  // unique in the tenant.
  const row = kept.id
    ? await store.webhookSources.get(tenant.id, kept.id)
    : (await store.webhookSources.list(tenant.id, { limit: 1, where: { name: "dev" } }))[0];
  if (row && kept.token && row.tokenDigest === webhookTokenDigest(kept.token)) return { id: row.id, token: kept.token };
  const { webhookSource, token } = row
    ? await platform.invokeAsOperator("rotateWebhookSourceToken", { $typeName: "platform.v1.RotateWebhookSourceTokenRequest", id: row.id }, "dev")
    : await platform.invokeAsOperator(
        "createWebhookSource",
        {
          $typeName: "platform.v1.CreateWebhookSourceRequest",
          webhookSource: create(WebhookSourceSchema, { name: "dev" }),
        },
        "dev",
      );
  // Init shapes leave every field optional; both handlers set these two.
  const source: DevWebhookSource = { id: webhookSource?.id ?? "", token: token ?? "" };
  writeFileSync(file, JSON.stringify(source), { mode: 0o600 });
  return source;
}
