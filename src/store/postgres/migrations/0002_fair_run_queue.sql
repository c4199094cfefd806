DROP INDEX "runs_queue";--> statement-breakpoint
DROP INDEX "runs_tenant_status";--> statement-breakpoint
CREATE INDEX "runs_queued" ON "runs" USING btree ("tenant_id","id") WHERE status = 'queued';