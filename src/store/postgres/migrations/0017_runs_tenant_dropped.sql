DROP INDEX "runs_tenant";--> statement-breakpoint
DROP INDEX "runs_event";--> statement-breakpoint
CREATE INDEX "runs_event" ON "runs" USING btree ("event_id","tenant_id");