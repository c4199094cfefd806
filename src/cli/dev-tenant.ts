import { Role } from "../../gen/platform/v1/common_pb.js";
import type { Platform } from "../service/platform.js";
import type { Store } from "../store/store.js";

// Tenant `dev` and its admins (the dev client, the dev user), checked on
// every start of `agentplane dev`, so a data dir from before the dev user
// existed gains its Member row.
export async function ensureDevTenant(store: Store, platform: Platform, admins: string[]): Promise<void> {
  if (!(await store.tenants.get("dev")))
    await platform.invokeAsOperator("createTenant", {
      $typeName: "platform.v1.CreateTenantRequest",
      tenant: { $typeName: "platform.v1.Tenant", id: "", slug: "dev", displayName: "Development" },
    });
  const tenant = (await store.tenants.get("dev"))!;
  for (const subject of admins) {
    if (await store.members.findBySubject(tenant.id, subject)) continue;
    await platform.invokeAsOperator(
      "addMember",
      { $typeName: "platform.v1.AddMemberRequest", member: { $typeName: "platform.v1.Member", id: "", tenant: "dev", subject, role: Role.ADMIN } },
      "dev",
    );
  }
}
