ALTER TABLE `triggers` ADD `filter_error` text;--> statement-breakpoint
ALTER TABLE `triggers` ADD `filter_error_time` integer;