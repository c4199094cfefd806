-- Rate-limit buckets are written on the webhook path by every replica: unlogged,
-- a take's commit waits for no WAL flush. After a crash the table is empty, so
-- every bucket starts full again; standbys do not have it (a promoted one
-- starts with full buckets too).
ALTER TABLE "rate_limit_buckets" SET UNLOGGED;
