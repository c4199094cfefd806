CREATE TABLE `schedule_slots` (
	`trigger_id` text NOT NULL,
	`slot_time` integer NOT NULL,
	`run_id` text NOT NULL,
	PRIMARY KEY(`trigger_id`, `slot_time`),
	FOREIGN KEY (`trigger_id`) REFERENCES `triggers`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
DROP INDEX `runs_queue`;--> statement-breakpoint
CREATE INDEX `runs_leases` ON `runs` (`status`,`lease_expire_time`);--> statement-breakpoint
CREATE INDEX `runs_queue` ON `runs` (`status`,`id`);