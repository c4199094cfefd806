CREATE TABLE "agents" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"instructions" text DEFAULT '' NOT NULL,
	"spec" jsonb NOT NULL,
	"model_api_key" text,
	"max_steps" integer NOT NULL,
	"timeout_ms" integer NOT NULL,
	"max_concurrent_runs" integer,
	"enabled" boolean NOT NULL,
	"create_time" bigint NOT NULL,
	"update_time" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "events" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"source_id" text NOT NULL,
	"event_type" text NOT NULL,
	"payload" jsonb NOT NULL,
	"receive_time" bigint NOT NULL,
	"idempotency_key" text,
	"matched_trigger_ids" jsonb NOT NULL,
	"create_time" bigint NOT NULL,
	"update_time" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "members" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"subject" text NOT NULL,
	"role" text NOT NULL,
	"create_time" bigint NOT NULL,
	"update_time" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "rate_limit_buckets" (
	"key" text PRIMARY KEY NOT NULL,
	"tokens" double precision NOT NULL,
	"refill_time" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "runs" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"agent_id" text NOT NULL,
	"trigger_id" text,
	"event_id" text,
	"input" jsonb,
	"status" text NOT NULL,
	"attempt" integer DEFAULT 0 NOT NULL,
	"steps" jsonb NOT NULL,
	"output" jsonb,
	"error" text DEFAULT '' NOT NULL,
	"start_time" bigint,
	"end_time" bigint,
	"lease_owner" text,
	"lease_expire_time" bigint,
	"create_time" bigint NOT NULL,
	"update_time" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "schedule_slots" (
	"trigger_id" text NOT NULL,
	"slot_time" bigint NOT NULL,
	"run_id" text NOT NULL,
	CONSTRAINT "schedule_slots_trigger_id_slot_time_pk" PRIMARY KEY("trigger_id","slot_time")
);
--> statement-breakpoint
CREATE TABLE "skills" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"name" text NOT NULL,
	"mcp_url" text NOT NULL,
	"auth" jsonb NOT NULL,
	"auth_secret" text,
	"tools" jsonb NOT NULL,
	"tools_refresh_time" bigint,
	"tools_refresh_error" text DEFAULT '' NOT NULL,
	"create_time" bigint NOT NULL,
	"update_time" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tenants" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"slug" text NOT NULL,
	"display_name" text DEFAULT '' NOT NULL,
	"create_time" bigint NOT NULL,
	"update_time" bigint NOT NULL,
	CONSTRAINT "tenants_slug_unique" UNIQUE("slug")
);
--> statement-breakpoint
CREATE TABLE "triggers" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"agent_id" text NOT NULL,
	"enabled" boolean NOT NULL,
	"kind" text NOT NULL,
	"source_id" text,
	"event_type_pattern" text,
	"filter" text,
	"cron" text,
	"timezone" text,
	"filter_error" text,
	"filter_error_time" bigint,
	"create_time" bigint NOT NULL,
	"update_time" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_sources" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"name" text NOT NULL,
	"enabled" boolean NOT NULL,
	"token_digest" text NOT NULL,
	"previous_token_digest" text,
	"previous_token_expire_time" bigint,
	"create_time" bigint NOT NULL,
	"update_time" bigint NOT NULL,
	CONSTRAINT "webhook_sources_token_digest_unique" UNIQUE("token_digest"),
	CONSTRAINT "webhook_sources_previous_token_digest_unique" UNIQUE("previous_token_digest")
);
--> statement-breakpoint
ALTER TABLE "agents" ADD CONSTRAINT "agents_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "members" ADD CONSTRAINT "members_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "schedule_slots" ADD CONSTRAINT "schedule_slots_trigger_id_triggers_id_fk" FOREIGN KEY ("trigger_id") REFERENCES "public"."triggers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "skills" ADD CONSTRAINT "skills_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "triggers" ADD CONSTRAINT "triggers_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "triggers" ADD CONSTRAINT "triggers_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "triggers" ADD CONSTRAINT "triggers_source_id_webhook_sources_id_fk" FOREIGN KEY ("source_id") REFERENCES "public"."webhook_sources"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_sources" ADD CONSTRAINT "webhook_sources_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "agents_tenant" ON "agents" USING btree ("tenant_id","id");--> statement-breakpoint
CREATE INDEX "events_tenant" ON "events" USING btree ("tenant_id","id");--> statement-breakpoint
CREATE INDEX "events_receive_time" ON "events" USING btree ("receive_time");--> statement-breakpoint
CREATE UNIQUE INDEX "events_source_idempotency" ON "events" USING btree ("source_id","idempotency_key") WHERE idempotency_key is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "members_tenant_subject" ON "members" USING btree ("tenant_id","subject");--> statement-breakpoint
CREATE INDEX "runs_tenant" ON "runs" USING btree ("tenant_id","id");--> statement-breakpoint
CREATE INDEX "runs_event" ON "runs" USING btree ("event_id");--> statement-breakpoint
CREATE INDEX "runs_queue" ON "runs" USING btree ("status","id");--> statement-breakpoint
CREATE INDEX "runs_tenant_status" ON "runs" USING btree ("tenant_id","status");--> statement-breakpoint
CREATE INDEX "runs_leases" ON "runs" USING btree ("status","lease_expire_time");--> statement-breakpoint
CREATE INDEX "runs_end_time" ON "runs" USING btree ("end_time");--> statement-breakpoint
CREATE INDEX "skills_tenant" ON "skills" USING btree ("tenant_id","id");--> statement-breakpoint
CREATE INDEX "triggers_tenant" ON "triggers" USING btree ("tenant_id","id");--> statement-breakpoint
CREATE INDEX "triggers_agent" ON "triggers" USING btree ("tenant_id","agent_id");--> statement-breakpoint
CREATE INDEX "triggers_match" ON "triggers" USING btree ("tenant_id","kind","source_id");--> statement-breakpoint
CREATE INDEX "webhook_sources_tenant" ON "webhook_sources" USING btree ("tenant_id","id");