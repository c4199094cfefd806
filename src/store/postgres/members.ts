import { and, count, eq } from "drizzle-orm";
import { pg } from "./errors.js";
import { lockTenantScope } from "./locks.js";
import type { Db } from "./open.js";
import { members } from "./schema.js";
import type { MemberChange, MemberChangeResult } from "../store.js";

// Removing or demoting a member, refused when it would leave the tenant
// without an admin. The count and the write hold the tenant's members lock
// (the one member inserts take), so two admins demoting each other on two
// replicas cannot both succeed.
export function createPgMemberChange(db: Db) {
  return (tenantId: string, id: string, change: MemberChange): Promise<MemberChangeResult> =>
    pg(() =>
      db.transaction(async (tx): Promise<MemberChangeResult> => {
        await lockTenantScope(tx, "members", tenantId);
        const byId = and(eq(members.tenantId, tenantId), eq(members.id, id));
        const [row] = await tx.select().from(members).where(byId);
        if (!row) return { outcome: "not_found" };
        const losesAdmin = row.role === "admin" && (change.remove || change.role !== "admin");
        if (losesAdmin) {
          const [{ admins }] = (await tx
            .select({ admins: count() })
            .from(members)
            .where(and(eq(members.tenantId, tenantId), eq(members.role, "admin")))) as [{ admins: number }];
          if (admins <= 1) return { outcome: "last_admin" };
        }
        if (change.remove) {
          await tx.delete(members).where(byId);
          return { outcome: "done", row };
        }
        const [updated] = await tx.update(members).set({ role: change.role, updateTime: change.updateTime }).where(byId).returning();
        return { outcome: "done", row: updated! };
      }),
    );
}
