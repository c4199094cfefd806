import { createContext, useContext } from "react";
import { Role } from "../../gen/platform/v1/common_pb.js";
import type { Membership } from "../../gen/platform/v1/tenant_pb.js";
import { api, type Api } from "./api.js";

export interface TenantContext {
  tenant: string;
  role: Role;
  // Admins write; viewers see no write controls (the API refuses them anyway).
  canWrite: boolean;
  api: Api;
  // Prefix of this tenant's routes: "/t/<slug>".
  base: string;
}

const Ctx = createContext<TenantContext | undefined>(undefined);

export function tenantContext(m: Membership): TenantContext {
  return { tenant: m.tenant, role: m.role, canWrite: m.role === Role.ADMIN, api: api(m.tenant), base: `/t/${encodeURIComponent(m.tenant)}` };
}

export const TenantProvider = Ctx.Provider;

export function useTenant(): TenantContext {
  const ctx = useContext(Ctx);
  if (!ctx) throw new Error("useTenant outside a tenant");
  return ctx;
}
