DROP INDEX "runs_status";--> statement-breakpoint
CREATE INDEX "runs_status" ON "runs" USING btree ("tenant_id","status","id") WHERE status <> 'queued';