PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_webhook_sources` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`name` text NOT NULL,
	`enabled` integer NOT NULL,
	`kind` text DEFAULT 'envelope' NOT NULL,
	`token_digest` text,
	`previous_token_digest` text,
	`previous_token_expire_time` integer,
	`signing_secret` text,
	`previous_signing_secret` text,
	`previous_signing_secret_expire_time` integer,
	`mapping` text,
	`create_time` integer NOT NULL,
	`update_time` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_webhook_sources`("id", "tenant_id", "name", "enabled", "token_digest", "previous_token_digest", "previous_token_expire_time", "create_time", "update_time") SELECT "id", "tenant_id", "name", "enabled", "token_digest", "previous_token_digest", "previous_token_expire_time", "create_time", "update_time" FROM `webhook_sources`;--> statement-breakpoint
DROP TABLE `webhook_sources`;--> statement-breakpoint
ALTER TABLE `__new_webhook_sources` RENAME TO `webhook_sources`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_sources_token_digest_unique` ON `webhook_sources` (`token_digest`);--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_sources_previous_token_digest_unique` ON `webhook_sources` (`previous_token_digest`);--> statement-breakpoint
CREATE INDEX `webhook_sources_tenant` ON `webhook_sources` (`tenant_id`,`id`);--> statement-breakpoint
ALTER TABLE `skills` ADD `auth_private_key` text;