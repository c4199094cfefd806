DROP INDEX "runs_changes";--> statement-breakpoint
CREATE INDEX "runs_changes" ON "runs" USING btree ("tenant_id","update_time","id") WHERE status <> 'queued' or update_time <> create_time;