CREATE TABLE "overview_rollups" (
	"tenant_id" text NOT NULL,
	"slot" bigint NOT NULL,
	"kind" text NOT NULL,
	"status" text NOT NULL,
	"key" text NOT NULL,
	"n" integer NOT NULL,
	"failures" integer NOT NULL,
	CONSTRAINT "overview_rollups_tenant_id_slot_kind_status_key_pk" PRIMARY KEY("tenant_id","slot","kind","status","key")
);
--> statement-breakpoint
CREATE TABLE "overview_watermarks" (
	"tenant_id" text PRIMARY KEY NOT NULL,
	"sealed_from" bigint NOT NULL,
	"sealed_until" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "overview_rollups_slot" ON "overview_rollups" USING btree ("slot");