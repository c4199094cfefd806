PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_events` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`source_id` text NOT NULL,
	`event_type` text NOT NULL,
	`payload` text NOT NULL,
	`receive_time` integer NOT NULL,
	`idempotency_key` text,
	`matched_trigger_ids` text NOT NULL,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_events`("id", "tenant_id", "source_id", "event_type", "payload", "receive_time", "idempotency_key", "matched_trigger_ids", "create_time", "update_time") SELECT "id", "tenant_id", "source_id", "event_type", "payload", "receive_time", "idempotency_key", "matched_trigger_ids", "create_time", "update_time" FROM `events`;--> statement-breakpoint
DROP TABLE `events`;--> statement-breakpoint
ALTER TABLE `__new_events` RENAME TO `events`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `events_tenant` ON `events` (`tenant_id`,`id`);--> statement-breakpoint
CREATE INDEX `events_receive_time` ON `events` (`receive_time`);--> statement-breakpoint
CREATE UNIQUE INDEX `events_source_idempotency` ON `events` (`source_id`,`idempotency_key`) WHERE idempotency_key is not null;--> statement-breakpoint
CREATE TABLE `__new_runs` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`agent_id` text NOT NULL,
	`trigger_id` text,
	`event_id` text,
	`input` text,
	`status` text NOT NULL,
	`attempt` integer DEFAULT 0 NOT NULL,
	`steps` text NOT NULL,
	`output` text,
	`error` text DEFAULT '' NOT NULL,
	`start_time` integer,
	`end_time` integer,
	`lease_owner` text,
	`lease_expire_time` integer,
	`trace_parent` text,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_runs`("id", "tenant_id", "agent_id", "trigger_id", "event_id", "input", "status", "attempt", "steps", "output", "error", "start_time", "end_time", "lease_owner", "lease_expire_time", "trace_parent", "create_time", "update_time") SELECT "id", "tenant_id", "agent_id", "trigger_id", "event_id", "input", "status", "attempt", "steps", "output", "error", "start_time", "end_time", "lease_owner", "lease_expire_time", "trace_parent", "create_time", "update_time" FROM `runs`;--> statement-breakpoint
DROP TABLE `runs`;--> statement-breakpoint
ALTER TABLE `__new_runs` RENAME TO `runs`;--> statement-breakpoint
CREATE INDEX `runs_tenant` ON `runs` (`tenant_id`,`id`);--> statement-breakpoint
CREATE INDEX `runs_event` ON `runs` (`event_id`);--> statement-breakpoint
CREATE INDEX `runs_agent` ON `runs` (`tenant_id`,`agent_id`,`id`);--> statement-breakpoint
CREATE INDEX `runs_status` ON `runs` (`tenant_id`,`status`,`id`);--> statement-breakpoint
CREATE INDEX `runs_queued` ON `runs` (`tenant_id`,`id`) WHERE status = 'queued';--> statement-breakpoint
CREATE INDEX `runs_leases` ON `runs` (`lease_expire_time`) WHERE status = 'running';--> statement-breakpoint
CREATE INDEX `runs_end_time` ON `runs` (`end_time`);--> statement-breakpoint
CREATE INDEX `runs_changes` ON `runs` (`tenant_id`,`update_time`,`id`);--> statement-breakpoint
-- Dropping the old runs table dropped its change-signal trigger (0006): made
-- again on the new one, or another process would never learn of a
-- cancellation before its next heartbeat.
CREATE TRIGGER IF NOT EXISTS `runs_cancelled` AFTER UPDATE OF `status` ON `runs` WHEN NEW.`status` = 'cancelled' AND OLD.`status` <> 'cancelled' BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'runs_cancelled';
END;
