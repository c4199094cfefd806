-- Every replica drops its caches of these tables when they change: the
-- triggers notify for every writer (the service, another version, psql).
-- Statement-level: one notification per statement, and PostgreSQL folds the
-- equal ones of a transaction into one.
CREATE FUNCTION agentplane_notify_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agentplane_changed', TG_TABLE_NAME);
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER webhook_sources_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_sources
  FOR EACH STATEMENT EXECUTE FUNCTION agentplane_notify_changed();
--> statement-breakpoint
-- A filter's diagnostics (filter_error, filter_error_time) are written while
-- events are matched; they must not drop every replica's trigger caches. A
-- column added to triggers later must be added here.
CREATE TRIGGER triggers_changed AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF id, tenant_id, agent_id, enabled, kind,
  source_id, event_type_pattern, filter, cron, timezone, create_time, update_time ON triggers
  FOR EACH STATEMENT EXECUTE FUNCTION agentplane_notify_changed();
--> statement-breakpoint
CREATE TRIGGER agents_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON agents
  FOR EACH STATEMENT EXECUTE FUNCTION agentplane_notify_changed();
