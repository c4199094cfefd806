-- 0010 rebuilt webhook_sources (token_digest became nullable), and dropping
-- the old table dropped its change-signal triggers (0006): another process
-- then never learned that a source was disabled, rotated or deleted, and kept
-- serving it from its cache. They are made again on the new table.
CREATE TRIGGER IF NOT EXISTS `webhook_sources_inserted` AFTER INSERT ON `webhook_sources` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'webhook_sources';
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS `webhook_sources_updated` AFTER UPDATE ON `webhook_sources` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'webhook_sources';
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS `webhook_sources_deleted` AFTER DELETE ON `webhook_sources` BEGIN
	UPDATE `change_versions` SET `version` = `version` + 1 WHERE `name` = 'webhook_sources';
END;
