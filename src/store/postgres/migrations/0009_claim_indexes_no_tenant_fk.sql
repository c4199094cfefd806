ALTER TABLE "events" DROP CONSTRAINT "events_tenant_id_tenants_id_fk";
--> statement-breakpoint
ALTER TABLE "runs" DROP CONSTRAINT "runs_tenant_id_tenants_id_fk";
--> statement-breakpoint
DROP INDEX "runs_leases";--> statement-breakpoint
CREATE INDEX "runs_leases" ON "runs" USING btree ("lease_expire_time") WHERE status = 'running';