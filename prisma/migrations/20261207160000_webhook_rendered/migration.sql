-- AlterTable: events written before this carry their body as sent (rendered); new ones are rendered before their first try.
ALTER TABLE "WebhookEvent" ADD COLUMN     "rendered" BOOLEAN NOT NULL DEFAULT true;
ALTER TABLE "WebhookEvent" ALTER COLUMN "rendered" SET DEFAULT false;
