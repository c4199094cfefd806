-- Only ended runs are in the index: a run's insert and claim no longer add
-- an entry, and retention's query walks it in end-time order on any plan.
-- Rebuilding it reads runs once and holds off writes to runs meanwhile.
DROP INDEX "runs_end_time";--> statement-breakpoint
CREATE INDEX "runs_end_time" ON "runs" USING btree ("end_time") WHERE status in ('succeeded', 'failed', 'cancelled', 'timed_out');