CREATE INDEX `runs_agent` ON `runs` (`tenant_id`,`agent_id`,`id`);--> statement-breakpoint
CREATE INDEX `runs_status` ON `runs` (`tenant_id`,`status`,`id`);