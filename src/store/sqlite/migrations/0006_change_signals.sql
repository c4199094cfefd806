-- What other processes on this file changed, for the store's signals
-- (../signals.ts): each row counts the commits that changed a table the
-- service caches, or that cancelled runs. A process sees another's commit
-- through PRAGMA data_version and reads this table to learn which. Queued
-- runs are not counted: a trigger on every run insert would cost the ingest
-- path, and any commit of another process may have queued runs anyway.
-- SQLite only: PostgreSQL replicas are told through NOTIFY.
CREATE TABLE `change_versions` (
	`name` text PRIMARY KEY NOT NULL,
	`version` integer NOT NULL
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `change_versions` (`name`, `version`) VALUES ('webhook_sources', 0), ('triggers', 0), ('agents', 0), ('runs_cancelled', 0);
--> statement-breakpoint
CREATE TRIGGER `webhook_sources_inserted` AFTER INSERT ON `webhook_sources` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'webhook_sources';
END;
--> statement-breakpoint
CREATE TRIGGER `webhook_sources_updated` AFTER UPDATE ON `webhook_sources` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'webhook_sources';
END;
--> statement-breakpoint
CREATE TRIGGER `webhook_sources_deleted` AFTER DELETE ON `webhook_sources` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'webhook_sources';
END;
--> statement-breakpoint
CREATE TRIGGER `triggers_inserted` AFTER INSERT ON `triggers` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'triggers';
END;
--> statement-breakpoint
-- Every column but the filter diagnostics (filter_error, filter_error_time),
-- which matching writes on its own and never reads: a failing filter must not
-- drop every process's trigger cache. A column added to triggers later must
-- be added here.
CREATE TRIGGER `triggers_updated` AFTER UPDATE OF `id`, `tenant_id`, `agent_id`, `enabled`, `kind`, `source_id`,
	`event_type_pattern`, `filter`, `cron`, `timezone`, `create_time`, `update_time` ON `triggers` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'triggers';
END;
--> statement-breakpoint
CREATE TRIGGER `triggers_deleted` AFTER DELETE ON `triggers` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'triggers';
END;
--> statement-breakpoint
CREATE TRIGGER `agents_inserted` AFTER INSERT ON `agents` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'agents';
END;
--> statement-breakpoint
CREATE TRIGGER `agents_updated` AFTER UPDATE ON `agents` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'agents';
END;
--> statement-breakpoint
CREATE TRIGGER `agents_deleted` AFTER DELETE ON `agents` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'agents';
END;
--> statement-breakpoint
CREATE TRIGGER `runs_cancelled` AFTER UPDATE OF `status` ON `runs` WHEN NEW.`status` = 'cancelled' AND OLD.`status` <> 'cancelled' BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'runs_cancelled';
END;
