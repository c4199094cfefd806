DROP INDEX "runs_leases";--> statement-breakpoint
CREATE INDEX "runs_leases" ON "runs" USING btree ("lease_expire_time") WHERE status = 'running';