CREATE TABLE `rate_limit_buckets` (
	`key` text PRIMARY KEY NOT NULL,
	`tokens` real NOT NULL,
	`refill_time` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `agents` ADD `max_concurrent_runs` integer;--> statement-breakpoint
CREATE INDEX `events_receive_time` ON `events` (`receive_time`);--> statement-breakpoint
CREATE INDEX `runs_end_time` ON `runs` (`end_time`);