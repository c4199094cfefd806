DROP INDEX "runs_status";--> statement-breakpoint
DROP INDEX "runs_changes";--> statement-breakpoint
CREATE INDEX "runs_running" ON "runs" USING btree ("tenant_id","id") WHERE status = 'running';--> statement-breakpoint
CREATE INDEX "runs_status" ON "runs" USING btree ("tenant_id","status","id") WHERE status in ('succeeded', 'failed', 'cancelled', 'timed_out');--> statement-breakpoint
CREATE INDEX "runs_changes" ON "runs" USING btree ("tenant_id","update_time","id") WHERE status in ('succeeded', 'failed', 'cancelled', 'timed_out') or update_time <> create_time;