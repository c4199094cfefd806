CREATE TABLE `queued_run_counts` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`n` integer NOT NULL
);
--> statement-breakpoint
-- The counts are kept by the database, for every writer. Row-level (SQLite
-- has no other), and only for a status crossing 'queued'.
CREATE TRIGGER `runs_queued_inserted` AFTER INSERT ON `runs` WHEN new.`status` = 'queued' BEGIN
	INSERT INTO `queued_run_counts` (`tenant_id`, `n`) VALUES (new.`tenant_id`, 1)
	  ON CONFLICT (`tenant_id`) DO UPDATE SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `runs_queued_entered` AFTER UPDATE OF `status` ON `runs`
	WHEN new.`status` = 'queued' AND old.`status` <> 'queued' BEGIN
	INSERT INTO `queued_run_counts` (`tenant_id`, `n`) VALUES (new.`tenant_id`, 1)
	  ON CONFLICT (`tenant_id`) DO UPDATE SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `runs_queued_left` AFTER UPDATE OF `status` ON `runs`
	WHEN old.`status` = 'queued' AND new.`status` <> 'queued' BEGIN
	UPDATE `queued_run_counts` SET `n` = `n` - 1 WHERE `tenant_id` = old.`tenant_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `runs_queued_deleted` AFTER DELETE ON `runs` WHEN old.`status` = 'queued' BEGIN
	UPDATE `queued_run_counts` SET `n` = `n` - 1 WHERE `tenant_id` = old.`tenant_id`;
END;
--> statement-breakpoint
-- The runs queued before the triggers (the migration holds the write lock).
INSERT INTO `queued_run_counts` (`tenant_id`, `n`)
	SELECT `tenant_id`, count(*) FROM `runs` WHERE `status` = 'queued' GROUP BY `tenant_id`;
