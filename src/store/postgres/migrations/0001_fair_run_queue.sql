DROP INDEX "runs_tenant_status";--> statement-breakpoint
DROP INDEX "runs_queue";--> statement-breakpoint
CREATE INDEX "runs_queue" ON "runs" USING btree ("status","tenant_id","id");