-- Names are unique per tenant for agents, skills and webhook sources. A
-- database from before may hold duplicates: the oldest keeps its name, each
-- later one gets its id appended, so the unique indexes can be built and no
-- record is lost.
UPDATE "agents" SET "name" = "name" || ' (' || "id" || ')' WHERE EXISTS (SELECT 1 FROM "agents" "o" WHERE "o"."tenant_id" = "agents"."tenant_id" AND "o"."name" = "agents"."name" AND ("o"."create_time" < "agents"."create_time" OR ("o"."create_time" = "agents"."create_time" AND "o"."id" < "agents"."id")));--> statement-breakpoint
UPDATE "skills" SET "name" = "name" || ' (' || "id" || ')' WHERE EXISTS (SELECT 1 FROM "skills" "o" WHERE "o"."tenant_id" = "skills"."tenant_id" AND "o"."name" = "skills"."name" AND ("o"."create_time" < "skills"."create_time" OR ("o"."create_time" = "skills"."create_time" AND "o"."id" < "skills"."id")));--> statement-breakpoint
UPDATE "webhook_sources" SET "name" = "name" || ' (' || "id" || ')' WHERE EXISTS (SELECT 1 FROM "webhook_sources" "o" WHERE "o"."tenant_id" = "webhook_sources"."tenant_id" AND "o"."name" = "webhook_sources"."name" AND ("o"."create_time" < "webhook_sources"."create_time" OR ("o"."create_time" = "webhook_sources"."create_time" AND "o"."id" < "webhook_sources"."id")));--> statement-breakpoint
CREATE UNIQUE INDEX "agents_tenant_name" ON "agents" USING btree ("tenant_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "skills_tenant_name" ON "skills" USING btree ("tenant_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_sources_tenant_name" ON "webhook_sources" USING btree ("tenant_id","name");