-- Triggers that fire: the original's fields (a split schedule with seconds, start and end dates,
-- a session target, context, failures) and a row per run. Existing triggers are kept: their
-- columns are renamed, not dropped, and their five-field crons gain a seconds field.

-- CreateEnum
CREATE TYPE "TriggerSessionTarget" AS ENUM ('new', 'existing');

-- CreateEnum
CREATE TYPE "TriggerRunStatus" AS ENUM ('running', 'completed', 'failed');

-- AlterTable: renamed columns keep their values
ALTER TABLE "Trigger" RENAME COLUMN "triggerPrompt" TO "prompt";
ALTER TABLE "Trigger" RENAME COLUMN "lastRun" TO "lastRunTime";

-- AlterTable
ALTER TABLE "Trigger" ADD COLUMN     "context" TEXT,
ADD COLUMN     "endDate" TIMESTAMP(3),
ADD COLUMN     "errorCount" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "lastError" TEXT,
ADD COLUMN     "runningRunId" TEXT,
ADD COLUMN     "runningSince" TIMESTAMP(3),
ADD COLUMN     "sessionTarget" "TriggerSessionTarget" NOT NULL DEFAULT 'new',
ADD COLUMN     "startDate" TIMESTAMP(3),
ADD COLUMN     "queuedFor" TIMESTAMP(3),
ALTER COLUMN "cron" DROP NOT NULL;

-- Existing rows: a five-field cron ran at second 0; a trigger with a session posted into it;
-- nothing ever ran them, so none is running, and each active one is planned afresh at start-up
-- (its next run computed, its job queued) from a null next run.
UPDATE "Trigger" SET "cron" = '0 ' || btrim("cron") WHERE array_length(regexp_split_to_array(btrim("cron"), '\s+'), 1) = 5;
UPDATE "Trigger" SET "sessionTarget" = 'existing' WHERE "sessionId" IS NOT NULL;
UPDATE "Trigger" SET "status" = 'active' WHERE "status" = 'running';
UPDATE "Trigger" SET "nextRun" = NULL;

-- CreateTable
CREATE TABLE "TriggerRun" (
    "id" TEXT NOT NULL,
    "triggerId" TEXT NOT NULL,
    "scheduledFor" TIMESTAMP(3),
    "status" "TriggerRunStatus" NOT NULL DEFAULT 'running',
    "error" TEXT,
    "sessionId" TEXT,
    "messageId" TEXT,
    "startedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finishedAt" TIMESTAMP(3),

    CONSTRAINT "TriggerRun_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "TriggerRun_triggerId_startedAt_idx" ON "TriggerRun"("triggerId", "startedAt");

-- CreateIndex
CREATE UNIQUE INDEX "TriggerRun_triggerId_scheduledFor_key" ON "TriggerRun"("triggerId", "scheduledFor");

-- CreateIndex
CREATE INDEX "Trigger_agentId_createdAt_idx" ON "Trigger"("agentId", "createdAt");

-- The planner finds, without a scan, the active triggers with no next run planned and those whose
-- next run has no job queued yet (normally none of either).
CREATE INDEX "Trigger_unplanned_idx" ON "Trigger"("id") WHERE "status" = 'active' AND "nextRun" IS NULL AND "cron" IS NOT NULL;
CREATE INDEX "Trigger_unqueued_idx" ON "Trigger"("id") WHERE "nextRun" IS NOT NULL AND "nextRun" IS DISTINCT FROM "queuedFor";

-- AddForeignKey
ALTER TABLE "TriggerRun" ADD CONSTRAINT "TriggerRun_triggerId_fkey" FOREIGN KEY ("triggerId") REFERENCES "Trigger"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "TriggerRun" ADD CONSTRAINT "TriggerRun_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "TriggerRun" ADD CONSTRAINT "TriggerRun_messageId_fkey" FOREIGN KEY ("messageId") REFERENCES "Message"("id") ON DELETE SET NULL ON UPDATE CASCADE;
