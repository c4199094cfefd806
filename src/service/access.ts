// Who may call which operation. The rules come from the descriptors:
// `idempotency_level = NO_SIDE_EFFECTS` marks reads, the `(platform.v1.access)`
// option marks platform, bootstrap and caller operations.
import { getOption, type DescMethod } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { Access, access } from "../../gen/platform/v1/options_pb.js";
import type { Authenticator, Principal } from "../integrations/identity/index.js";
import type { Store } from "../store/store.js";
import { invalidArgument, permissionDenied } from "./errors.js";
import { isSlug } from "./validate.js";

export type Surface = "api" | "mcp";
// A member's role in a tenant, as stored and as `authorize` decides it (the
// API's is the generated `Role` enum; a serve process's is config.ts's `ServeRole`).
export type RoleName = "admin" | "viewer";

// What a surface extracted from a request, before anything is trusted.
export interface CallerInput {
  token?: string;
  tenant?: string;
  // Name of an organization header the caller sent (X-Org-ID, X-Organization-ID).
  orgHeader?: string;
  // Told the tenant once the caller is authorized in it (the access log names it).
  onTenant?(tenant: { id: string; slug: string }): void;
}

export interface CallContext {
  principal: Principal;
  surface: Surface;
  // Set for tenant operations; never for platform and caller operations.
  tenant?: { id: string; slug: string };
  role?: RoleName;
}

export interface MethodRule {
  write: boolean;
  access: Access;
}

export function ruleOf(method: DescMethod): MethodRule {
  return {
    write: method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS,
    access: getOption(method, access),
  };
}

// Methods that select no tenant: platform operations, and caller operations
// whose answer is only about the caller (a tenant slug sent is ignored).
export const tenantless = (rule: MethodRule) => rule.access === Access.PLATFORM_ADMIN || rule.access === Access.CALLER;

export const PLATFORM_ADMIN_SCOPE = "platform:admin";

// Scopes that satisfy a read or a write on each surface.
const SCOPES: Record<Surface, { read: string[]; write: string[] }> = {
  api: { read: ["platform:read", "platform:write"], write: ["platform:write"] },
  mcp: { read: ["mcp:platform.read", "mcp:platform"], write: ["mcp:platform.write", "mcp:platform"] },
};

export function requiredScopes(surface: Surface, rule: MethodRule): string[] {
  if (rule.access === Access.PLATFORM_ADMIN) return [PLATFORM_ADMIN_SCOPE];
  return SCOPES[surface][rule.write ? "write" : "read"];
}

// What caller operations (ListMemberships) need of the tenancy rules.
export interface CallerRoles {
  // Claim mode: the slug the token's tenant claim names ("" when it names
  // none). Undefined under the control plane, where Member rows decide.
  claimedSlug(principal: Principal): string | undefined;
  // The role `authorize` would give the caller in the tenant, without the
  // platform:admin bypass: its Member row's, or in claim mode the one its
  // scopes make.
  roleIn(principal: Principal, tenantId: string): Promise<RoleName | undefined>;
}

export interface AccessOptions {
  store: Store;
  authenticator: Authenticator;
  // Unset: control plane (Member rows). Set: claim that must equal the slug.
  tenantClaim?: string;
}

// Whether the principal's scopes allow the method on the surface; a
// `platform:admin` caller may do tenant-or-platform-admin operations anyway.
export function scopeAllows(principal: Principal, surface: Surface, rule: MethodRule): boolean {
  if (rule.access === Access.TENANT_OR_PLATFORM_ADMIN && principal.scopes.has(PLATFORM_ADMIN_SCOPE)) return true;
  return requiredScopes(surface, rule).some((s) => principal.scopes.has(s));
}

export function createAccess({ store, authenticator, tenantClaim }: AccessOptions) {
  async function resolveRole(principal: Principal, tenantId: string): Promise<RoleName | undefined> {
    const member = await store.members.findBySubject(tenantId, principal.subject);
    if (member) return member.role;
    if (tenantClaim === undefined) return undefined;
    // Claim mode without a Member row: a write scope on either surface makes an admin.
    const writeScopes = [...SCOPES.api.write, ...SCOPES.mcp.write];
    return writeScopes.some((s) => principal.scopes.has(s)) ? "admin" : "viewer";
  }

  // The bearer token's principal; refuses organization headers under the
  // control plane (the tenant comes from the slug and the token only).
  async function identify(input: CallerInput, surface: Surface): Promise<Principal> {
    if (!input.token) throw new ConnectError("missing bearer token", Code.Unauthenticated);
    const principal = await authenticator.authenticate(input.token);
    if (principal.mcpOnly && surface !== "mcp")
      throw new ConnectError("token audience is the MCP endpoint (<public url>/mcp), not this API", Code.Unauthenticated);
    if (tenantClaim === undefined && input.orgHeader)
      throw invalidArgument(
        input.orgHeader,
        "organization headers are not accepted; the tenant comes from X-Platform-Tenant and the token",
      );
    return principal;
  }

  // The selected tenant and the caller's own role in it (Member row, or the
  // claim). `adminBypass`: a platform admin may select an existing tenant
  // without a role there; its role then stays undefined.
  async function resolveTenant(principal: Principal, slug: string | undefined, adminBypass: boolean) {
    if (!slug) throw invalidArgument("X-Platform-Tenant", "a tenant slug is required");
    if (!isSlug(slug)) throw invalidArgument("X-Platform-Tenant", `"${slug}" is not a tenant slug`);
    // One answer for "no such tenant" and "not a member": nothing is learned.
    const denied = () => permissionDenied(`not a member of tenant "${slug}"`);
    const claimMatches = tenantClaim === undefined || principal.claims[tenantClaim] === slug;
    if (!claimMatches && !adminBypass) throw denied();
    const tenant = await store.tenants.get(slug);
    if (!tenant || tenant.slug !== slug) {
      if (adminBypass) throw new ConnectError(`tenant "${slug}" not found`, Code.NotFound);
      throw denied();
    }
    const role = claimMatches ? await resolveRole(principal, tenant.id) : undefined;
    if (!role && !adminBypass) throw denied();
    return { tenant: { id: tenant.id, slug: tenant.slug }, role };
  }

  // Whether the platform:admin bypass applies to the method for this principal.
  const bypasses = (principal: Principal, rule: MethodRule) =>
    rule.access === Access.TENANT_OR_PLATFORM_ADMIN && principal.scopes.has(PLATFORM_ADMIN_SCOPE);

  function writeNeedsAdmin(method: DescMethod, rule: MethodRule, role: RoleName | undefined, slug: string): void {
    if (rule.write && role !== "admin") throw permissionDenied(`${method.name} needs the admin role in tenant "${slug}"`);
  }

  return {
    async authorize(method: DescMethod, input: CallerInput, surface: Surface): Promise<CallContext> {
      const principal = await identify(input, surface);
      const rule = ruleOf(method);
      if (!scopeAllows(principal, surface, rule))
        throw permissionDenied(`missing scope: ${method.name} needs ${requiredScopes(surface, rule).join(" or ")}`);
      if (tenantless(rule)) return { principal, surface };
      const adminBypass = bypasses(principal, rule);
      const { tenant, role } = await resolveTenant(principal, input.tenant, adminBypass);
      const effective = adminBypass ? "admin" : role;
      writeNeedsAdmin(method, rule, effective, tenant.slug);
      return { principal, surface, tenant, role: effective };
    },

    roles: {
      claimedSlug: (principal) => {
        if (tenantClaim === undefined) return undefined;
        const claim = principal.claims[tenantClaim];
        return typeof claim === "string" ? claim : "";
      },
      roleIn: (principal, tenantId) => resolveRole(principal, tenantId),
    } satisfies CallerRoles,

    // For a session-less surface that needs the caller's standing before it
    // knows the operation (the MCP endpoint lists only callable tools). A
    // platform admin without a role in the tenant stands there with no role:
    // it may call only the platform, caller and tenant-or-platform-admin methods.
    // Without a tenant selected it stands nowhere: only the tenant-less
    // methods are allowed (an MCP client finding its first tenant).
    async standing(input: CallerInput, surface: Surface): Promise<CallContext> {
      const principal = await identify(input, surface);
      if (!input.tenant) return { principal, surface };
      const { tenant, role } = await resolveTenant(principal, input.tenant, principal.scopes.has(PLATFORM_ADMIN_SCOPE));
      return { principal, surface, tenant, role };
    },

    // Whether a caller of known standing may call the method: the same
    // decision `authorize` makes, without the lookups.
    allows(call: CallContext, method: DescMethod): boolean {
      const rule = ruleOf(method);
      if (!scopeAllows(call.principal, call.surface, rule)) return false;
      if (tenantless(rule)) return true;
      if (!call.tenant) return false;
      if (bypasses(call.principal, rule)) return true;
      if (!call.role) return false;
      return !rule.write || call.role === "admin";
    },
  };
}
