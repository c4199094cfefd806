// The store commands (`migrate`, `tenant create`, `member add`, `source
// create`): the service layer on the configured store, without a server.
import { create } from "@bufbuild/protobuf";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { Role } from "../../gen/platform/v1/common_pb.js";
import { WebhookSourceKind, WebhookSourceSchema } from "../../gen/platform/v1/webhook_source_pb.js";
import { loadOperatorSettings, loadQuotas, loadStoreConfig } from "../config.js";
import { ExpressionSandbox } from "../integrations/expressions/sandbox.js";
import type { Authenticator } from "../integrations/identity/principal.js";
import { createOutboundFetch } from "../integrations/outbound/outbound.js";
import { createSkillPool } from "../integrations/skill-pool-factory.js";
import { SecretBox } from "../lib/secret-box.js";
import { invalidArgument } from "../service/errors.js";
import { newMemberFields } from "../service/members.js";
import { KIND_NAMES, kindNamed } from "../service/source-kinds.js";
import { createPlatform, type Platform } from "../service/platform.js";
import { newTenantFields } from "../service/tenants.js";
import { isSlug } from "../service/validate.js";
import { newWebhookSourceFields } from "../service/webhook-sources.js";
import { openStore as openConfiguredStore, storeLocation } from "../store/open.js";
import { openStore, storeOptions } from "./store.js";

// Store commands run with the operator's authority; no key is needed for
// records without secrets, so a throwaway key is fine here. They say which
// database they use (a wrong AGENTPLANE_DATA_DIR is the usual "not found").
// `existing`: the command needs a tenant, so a SQLite file that is not there
// yet is refused rather than created empty.
// `sealing`: the service's own key and public URL, for a command that seals
// a secret the service must open later (or prints a URL of it).
async function operatorPlatform(existing?: { tenant: string }, sealing?: { secretKey: string; publicUrl: string }) {
  const config = loadStoreConfig();
  const options = storeOptions(config);
  console.error(`database ${storeLocation(options)}`);
  if (existing && config.databaseUrl === undefined && !existsSync(config.sqlitePath))
    throw new Error(`tenant "${existing.tenant}" not found: there is no database at ${config.sqlitePath} yet (agentplane tenant create makes it)`);
  const store = await openConfiguredStore(options);
  const deny: Authenticator = { authenticate: () => Promise.reject(new Error("not used by the CLI")) };
  return {
    store,
    platform: createPlatform({
      store,
      secrets: sealing ? SecretBox.fromBase64(sealing.secretKey) : new SecretBox(randomBytes(32)),
      publicUrl: sealing?.publicUrl,
      authenticator: deny,
      skills: createSkillPool(createOutboundFetch()),
      sandbox: new ExpressionSandbox(),
      quotas: loadQuotas(),
    }),
  };
}

// A tenant named on the command line; one that is not a slug cannot exist.
function checkTenantSlug(tenant: string): void {
  if (!isSlug(tenant)) throw invalidArgument("tenant", `"${tenant}" is not a tenant slug (^[a-z][a-z0-9-]{1,62}$)`);
}

export async function migrate(): Promise<void> {
  const config = loadStoreConfig();
  await (await openStore(config)).close();
  console.log(`migrated ${storeLocation(storeOptions(config))}`);
}

export async function sourceCreate(tenant: string, name: string, kindName = "envelope", signingSecret = ""): Promise<void> {
  checkTenantSlug(tenant);
  const kind = kindNamed(kindName);
  if (kind === undefined) throw invalidArgument("--kind", `must be ${KIND_NAMES.join(", ")}; got "${kindName}"`);
  newWebhookSourceFields({ name, kind });
  // A signed kind's secret is sealed with the service's key, and its URL is
  // the service's public one.
  let sealing: { secretKey: string; publicUrl: string } | undefined;
  if (kind !== WebhookSourceKind.ENVELOPE) {
    const { secretKey, publicUrl } = loadOperatorSettings();
    if (!secretKey)
      throw new Error("a signed source's secret is sealed with the service's key: set AGENTPLANE_SECRET_KEY as the service has it (agentplane dev keeps its own in the data directory)");
    sealing = { secretKey, publicUrl };
  }
  const { store, platform } = await operatorPlatform({ tenant }, sealing);
  try {
    const created = await platform.invokeAsOperator(
      "createWebhookSource",
      { $typeName: "platform.v1.CreateWebhookSourceRequest", webhookSource: create(WebhookSourceSchema, { name, kind, signingSecret }) },
      tenant,
    );
    const source = created.webhookSource;
    if (kind === WebhookSourceKind.ENVELOPE) {
      console.log(`created webhook source ${source?.name} (${source?.id}) in ${tenant}`);
      console.log(`token (shown once, store it in a secrets manager): ${created.token}`);
      return;
    }
    console.log(`created ${kindName} webhook source ${source?.name} (${source?.id}) in ${tenant}`);
    console.log(`url (the provider posts here; set AGENTPLANE_PUBLIC_URL if it is not the service's public address): ${source?.url}`);
    if (created.signingSecret) console.log(`signing secret (shown once, give it to the provider and keep it in a secrets manager): ${created.signingSecret}`);
    else console.log("signing secret: the one given, stored encrypted");
  } finally {
    await store.close();
  }
}

export async function tenantCreate(slug: string, admin: string | undefined, displayName = ""): Promise<void> {
  newTenantFields({ slug, displayName });
  if (admin !== undefined) newMemberFields({ subject: admin, role: Role.ADMIN });
  const { store, platform } = await operatorPlatform();
  try {
    const { tenant } = await platform.invokeAsOperator("createTenant", { $typeName: "platform.v1.CreateTenantRequest", tenant: { $typeName: "platform.v1.Tenant", id: "", slug, displayName } });
    console.log(`created tenant ${tenant?.slug} (${tenant?.id})`);
    if (admin !== undefined) await addMember(platform, slug, admin, Role.ADMIN);
  } finally {
    await store.close();
  }
}

export async function memberAdd(tenant: string, subject: string, roleName: string): Promise<void> {
  if (roleName !== "admin" && roleName !== "viewer") throw new Error(`--role must be admin or viewer, got "${roleName}"`);
  const role = roleName === "admin" ? Role.ADMIN : Role.VIEWER;
  checkTenantSlug(tenant);
  newMemberFields({ subject, role });
  const { store, platform } = await operatorPlatform({ tenant });
  try {
    await addMember(platform, tenant, subject, role);
  } finally {
    await store.close();
  }
}

async function addMember(platform: Platform, tenant: string, subject: string, role: Role): Promise<void> {
  const { member } = await platform.invokeAsOperator(
    "addMember",
    { $typeName: "platform.v1.AddMemberRequest", member: { $typeName: "platform.v1.Member", id: "", tenant, subject, role } },
    tenant,
  );
  console.log(`added ${member?.subject} to ${tenant} as ${role === Role.ADMIN ? "admin" : "viewer"}`);
}

