CREATE TABLE `overview_rollups` (
	`tenant_id` text NOT NULL,
	`slot` integer NOT NULL,
	`kind` text NOT NULL,
	`status` text NOT NULL,
	`key` text NOT NULL,
	`n` integer NOT NULL,
	`failures` integer NOT NULL,
	PRIMARY KEY(`tenant_id`, `slot`, `kind`, `status`, `key`)
);
--> statement-breakpoint
CREATE INDEX `overview_rollups_slot` ON `overview_rollups` (`slot`);--> statement-breakpoint
CREATE TABLE `overview_watermarks` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`sealed_from` integer NOT NULL,
	`sealed_until` integer NOT NULL
);
