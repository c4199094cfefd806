// The REST mirror is derived from the descriptor; this table is the contract
// users see, so a proto change that moves a route shows up here.
import { PlatformService } from "../gen/platform/v1/platform_service_pb.js";
import { deriveRestRoutes } from "../src/surfaces/rest/rest-routes.js";

it("derives every REST route from the PlatformService descriptor", () => {
  const table = deriveRestRoutes(PlatformService).map((r) => `${r.verb} ${r.path} -> ${r.method.name}`);
  expect(table).toEqual([
    "POST /api/v1/tenants -> CreateTenant",
    "GET /api/v1/tenants -> ListTenants",
    "GET /api/v1/tenants/:id -> GetTenant",
    "PATCH /api/v1/tenants/:id -> UpdateTenant",
    "GET /api/v1/memberships -> ListMemberships",
    "GET /api/v1/tenant-overview -> GetTenantOverview",
    "POST /api/v1/test-expression -> TestExpression",
    "GET /api/v1/members -> ListMembers",
    "POST /api/v1/members -> AddMember",
    "PATCH /api/v1/members/:id -> UpdateMember",
    "DELETE /api/v1/members/:id -> RemoveMember",
    "GET /api/v1/agents -> ListAgents",
    "GET /api/v1/agents/:id -> GetAgent",
    "POST /api/v1/agents -> CreateAgent",
    "PATCH /api/v1/agents/:id -> UpdateAgent",
    "DELETE /api/v1/agents/:id -> DeleteAgent",
    "POST /api/v1/agents/:id/run -> RunAgent",
    "GET /api/v1/skills -> ListSkills",
    "GET /api/v1/skills/:id -> GetSkill",
    "POST /api/v1/skills -> CreateSkill",
    "PATCH /api/v1/skills/:id -> UpdateSkill",
    "DELETE /api/v1/skills/:id -> DeleteSkill",
    "POST /api/v1/skills/:id/refresh-tools -> RefreshSkillTools",
    "GET /api/v1/triggers -> ListTriggers",
    "GET /api/v1/triggers/:id -> GetTrigger",
    "POST /api/v1/triggers -> CreateTrigger",
    "PATCH /api/v1/triggers/:id -> UpdateTrigger",
    "DELETE /api/v1/triggers/:id -> DeleteTrigger",
    "GET /api/v1/webhook-sources -> ListWebhookSources",
    "GET /api/v1/webhook-sources/:id -> GetWebhookSource",
    "POST /api/v1/webhook-sources -> CreateWebhookSource",
    "PATCH /api/v1/webhook-sources/:id -> UpdateWebhookSource",
    "DELETE /api/v1/webhook-sources/:id -> DeleteWebhookSource",
    "POST /api/v1/webhook-sources/:id/rotate-token -> RotateWebhookSourceToken",
    "POST /api/v1/webhook-sources/:id/rotate-signing-secret -> RotateWebhookSourceSigningSecret",
    "POST /api/v1/webhook-sources/:id/send-test-event -> SendWebhookSourceTestEvent",
    "GET /api/v1/events -> ListEvents",
    "GET /api/v1/events/:id -> GetEvent",
    "POST /api/v1/events/:id/replay -> ReplayEvent",
    "GET /api/v1/runs -> ListRuns",
    "GET /api/v1/runs/:id -> GetRun",
    "POST /api/v1/runs/:id/cancel -> CancelRun",
  ]);
});
