// The rows every store returns and takes. They are inferred from the SQLite
// schema (the embedded default); the PostgreSQL schema is checked at compile
// time to infer the same shapes (postgres/schema.ts), so the service layer
// never learns which engine it has.
import type * as sqlite from "./sqlite/schema.js";

export type * from "./types.js";

export type TenantRow = typeof sqlite.tenants.$inferSelect;
export type MemberRow = typeof sqlite.members.$inferSelect;
export type AgentRow = typeof sqlite.agents.$inferSelect;
export type SkillRow = typeof sqlite.skills.$inferSelect;
export type WebhookSourceRow = typeof sqlite.webhookSources.$inferSelect;
export type TriggerRow = typeof sqlite.triggers.$inferSelect;
export type EventRow = typeof sqlite.events.$inferSelect;
export type RunRow = typeof sqlite.runs.$inferSelect;

export type TenantInsert = typeof sqlite.tenants.$inferInsert;
export type MemberInsert = typeof sqlite.members.$inferInsert;
export type AgentInsert = typeof sqlite.agents.$inferInsert;
export type SkillInsert = typeof sqlite.skills.$inferInsert;
export type WebhookSourceInsert = typeof sqlite.webhookSources.$inferInsert;
export type TriggerInsert = typeof sqlite.triggers.$inferInsert;
export type EventInsert = typeof sqlite.events.$inferInsert;
export type RunInsert = typeof sqlite.runs.$inferInsert;
