CREATE TABLE "queued_run_counts" (
	"tenant_id" text NOT NULL,
	"side" text NOT NULL,
	"n" bigint NOT NULL,
	CONSTRAINT "queued_run_counts_tenant_id_side_pk" PRIMARY KEY("tenant_id","side")
);
--> statement-breakpoint
-- The counts are kept by the database, for every writer (the service at any
-- version, psql). Statement-level, with transition tables: one upsert per
-- statement and tenant, however many runs it changed (a row-level trigger
-- would update one row once per run, in one transaction). The rows are
-- upserted in (tenant, side) order in every writer, so two statements lock
-- them in one order.
CREATE FUNCTION agentplane_runs_queued_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO queued_run_counts (tenant_id, side, n)
    SELECT tenant_id, 'in', count(*) FROM new_runs WHERE status = 'queued' GROUP BY tenant_id ORDER BY tenant_id
    ON CONFLICT (tenant_id, side) DO UPDATE SET n = queued_run_counts.n + excluded.n;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- A run's status crossing 'queued' either way; other changes count nothing.
CREATE FUNCTION agentplane_runs_queued_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO queued_run_counts (tenant_id, side, n)
    SELECT n.tenant_id, CASE WHEN n.status = 'queued' THEN 'in' ELSE 'out' END, count(*)
    FROM new_runs n JOIN old_runs o ON o.id = n.id
    WHERE (n.status = 'queued') <> (o.status = 'queued')
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (tenant_id, side) DO UPDATE SET n = queued_run_counts.n + excluded.n;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE FUNCTION agentplane_runs_queued_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO queued_run_counts (tenant_id, side, n)
    SELECT tenant_id, 'out', count(*) FROM old_runs WHERE status = 'queued' GROUP BY tenant_id ORDER BY tenant_id
    ON CONFLICT (tenant_id, side) DO UPDATE SET n = queued_run_counts.n + excluded.n;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER runs_queued_inserted AFTER INSERT ON runs REFERENCING NEW TABLE AS new_runs
  FOR EACH STATEMENT EXECUTE FUNCTION agentplane_runs_queued_inserted();
--> statement-breakpoint
CREATE TRIGGER runs_queued_updated AFTER UPDATE ON runs REFERENCING OLD TABLE AS old_runs NEW TABLE AS new_runs
  FOR EACH STATEMENT EXECUTE FUNCTION agentplane_runs_queued_updated();
--> statement-breakpoint
CREATE TRIGGER runs_queued_deleted AFTER DELETE ON runs REFERENCING OLD TABLE AS old_runs
  FOR EACH STATEMENT EXECUTE FUNCTION agentplane_runs_queued_deleted();
--> statement-breakpoint
-- TRUNCATE (an operator's, by hand) fires no row or delete trigger: the
-- counts go with the runs.
CREATE FUNCTION agentplane_runs_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM queued_run_counts;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER runs_truncated AFTER TRUNCATE ON runs FOR EACH STATEMENT EXECUTE FUNCTION agentplane_runs_truncated();
--> statement-breakpoint
-- The runs queued before the triggers. Creating a trigger locks runs against
-- writes until the migration commits, so none is counted twice or missed.
INSERT INTO queued_run_counts (tenant_id, side, n)
  SELECT tenant_id, 'in', count(*) FROM runs WHERE status = 'queued' GROUP BY tenant_id;
