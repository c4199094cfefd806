ALTER TABLE "webhook_sources" ALTER COLUMN "token_digest" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "skills" ADD COLUMN "auth_private_key" text;--> statement-breakpoint
ALTER TABLE "webhook_sources" ADD COLUMN "kind" text DEFAULT 'envelope' NOT NULL;--> statement-breakpoint
ALTER TABLE "webhook_sources" ADD COLUMN "signing_secret" text;--> statement-breakpoint
ALTER TABLE "webhook_sources" ADD COLUMN "previous_signing_secret" text;--> statement-breakpoint
ALTER TABLE "webhook_sources" ADD COLUMN "previous_signing_secret_expire_time" bigint;--> statement-breakpoint
ALTER TABLE "webhook_sources" ADD COLUMN "mapping" text;