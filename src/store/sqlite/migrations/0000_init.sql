CREATE TABLE `agents` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`name` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`instructions` text DEFAULT '' NOT NULL,
	`spec` text NOT NULL,
	`model_api_key` text,
	`max_steps` integer NOT NULL,
	`timeout_ms` integer NOT NULL,
	`enabled` integer NOT NULL,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `agents_tenant` ON `agents` (`tenant_id`,`id`);--> statement-breakpoint
CREATE TABLE `events` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`source_id` text NOT NULL,
	`event_type` text NOT NULL,
	`payload` text NOT NULL,
	`receive_time` integer NOT NULL,
	`idempotency_key` text,
	`matched_trigger_ids` text NOT NULL,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `events_tenant` ON `events` (`tenant_id`,`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `events_source_idempotency` ON `events` (`source_id`,`idempotency_key`) WHERE idempotency_key is not null;--> statement-breakpoint
CREATE TABLE `members` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`subject` text NOT NULL,
	`role` text NOT NULL,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `members_tenant_subject` ON `members` (`tenant_id`,`subject`);--> statement-breakpoint
CREATE TABLE `runs` (
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
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `runs_tenant` ON `runs` (`tenant_id`,`id`);--> statement-breakpoint
CREATE INDEX `runs_event` ON `runs` (`event_id`);--> statement-breakpoint
CREATE INDEX `runs_queue` ON `runs` (`status`,`lease_expire_time`);--> statement-breakpoint
CREATE TABLE `skills` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`name` text NOT NULL,
	`mcp_url` text NOT NULL,
	`auth` text NOT NULL,
	`auth_secret` text,
	`tools` text NOT NULL,
	`tools_refresh_time` integer,
	`tools_refresh_error` text DEFAULT '' NOT NULL,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `skills_tenant` ON `skills` (`tenant_id`,`id`);--> statement-breakpoint
CREATE TABLE `tenants` (
	`id` text PRIMARY KEY NOT NULL,
	`slug` text NOT NULL,
	`display_name` text DEFAULT '' NOT NULL,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tenants_slug_unique` ON `tenants` (`slug`);--> statement-breakpoint
CREATE TABLE `triggers` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`agent_id` text NOT NULL,
	`enabled` integer NOT NULL,
	`kind` text NOT NULL,
	`source_id` text,
	`event_type_pattern` text,
	`filter` text,
	`cron` text,
	`timezone` text,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`agent_id`) REFERENCES `agents`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`source_id`) REFERENCES `webhook_sources`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `triggers_tenant` ON `triggers` (`tenant_id`,`id`);--> statement-breakpoint
CREATE INDEX `triggers_agent` ON `triggers` (`tenant_id`,`agent_id`);--> statement-breakpoint
CREATE INDEX `triggers_match` ON `triggers` (`tenant_id`,`kind`,`source_id`);--> statement-breakpoint
CREATE TABLE `webhook_sources` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`name` text NOT NULL,
	`enabled` integer NOT NULL,
	`token_digest` text NOT NULL,
	`previous_token_digest` text,
	`previous_token_expire_time` integer,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_sources_token_digest_unique` ON `webhook_sources` (`token_digest`);--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_sources_previous_token_digest_unique` ON `webhook_sources` (`previous_token_digest`);--> statement-breakpoint
CREATE INDEX `webhook_sources_tenant` ON `webhook_sources` (`tenant_id`,`id`);