DROP INDEX `runs_leases`;--> statement-breakpoint
CREATE INDEX `runs_leases` ON `runs` (`lease_expire_time`) WHERE status = 'running';