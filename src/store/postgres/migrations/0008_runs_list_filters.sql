CREATE INDEX "runs_agent" ON "runs" USING btree ("tenant_id","agent_id","id");--> statement-breakpoint
CREATE INDEX "runs_status" ON "runs" USING btree ("tenant_id","status","id");