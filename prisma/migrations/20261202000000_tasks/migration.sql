-- Tasks: a tool run is a task, and a reply's tool call is one too. The table of tool calls
-- becomes the table of tasks in place (renamed, not copied: every row, id and ledger link stays),
-- gains what a task made by itself needs (whose it is, its agent and session, progress, public,
-- the process running it), and the ledger's link to it is named after it.

-- The status values are the same; the type is named after what it now describes.
ALTER TYPE "ToolCallStatus" RENAME TO "TaskStatus";

ALTER TABLE "ToolCall" RENAME TO "Task";
ALTER TABLE "Task" RENAME CONSTRAINT "ToolCall_pkey" TO "Task_pkey";
ALTER TABLE "Task" RENAME CONSTRAINT "ToolCall_messageId_fkey" TO "Task_messageId_fkey";
ALTER INDEX "ToolCall_messageId_position_key" RENAME TO "Task_messageId_position_key";

-- A task made by itself belongs to no message.
ALTER TABLE "Task" ALTER COLUMN "messageId" DROP NOT NULL,
ALTER COLUMN "position" DROP NOT NULL;

ALTER TABLE "Task" ADD COLUMN "userId" TEXT,
ADD COLUMN "agentId" TEXT,
ADD COLUMN "sessionId" TEXT,
ADD COLUMN "progress" DOUBLE PRECISION NOT NULL DEFAULT 0,
ADD COLUMN "public" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN "instance" TEXT;

ALTER TABLE "MannaLedger" RENAME COLUMN "toolCallId" TO "taskId";
ALTER TABLE "MannaLedger" RENAME CONSTRAINT "MannaLedger_toolCallId_fkey" TO "MannaLedger_taskId_fkey";
ALTER INDEX "MannaLedger_toolCallId_idx" RENAME TO "MannaLedger_taskId_idx";

-- The tool calls already made: their session and agent come from their message (an assistant
-- message's sender is its agent), and whose they are from who paid. A call that was charged
-- names its payer on its ledger rows; one that was not (refused before its hold) was the
-- session owner's, or the agent owner's where the agent pays for everything it does.
UPDATE "Task" AS t
SET "sessionId" = m."sessionId",
    "agentId" = a."id",
    "userId" = COALESCE(
      (SELECT l."userId" FROM "MannaLedger" AS l WHERE l."taskId" = t."id" AND l."amount" < 0 ORDER BY l."createdAt" LIMIT 1),
      CASE WHEN a."ownerPays" = 'full' THEN a."ownerId" ELSE s."ownerId" END
    ),
    "progress" = CASE WHEN t."status" = 'completed' THEN 1 ELSE 0 END
FROM "Message" AS m
JOIN "Session" AS s ON s."id" = m."sessionId"
LEFT JOIN "Agent" AS a ON a."id" = m."senderId"
WHERE m."id" = t."messageId";

ALTER TABLE "Task" ALTER COLUMN "userId" SET NOT NULL;

CREATE INDEX "Task_userId_createdAt_idx" ON "Task"("userId", "createdAt");
CREATE INDEX "Task_sessionId_idx" ON "Task"("sessionId");

ALTER TABLE "Task" ADD CONSTRAINT "Task_userId_fkey" FOREIGN KEY ("userId") REFERENCES "User"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "Task" ADD CONSTRAINT "Task_agentId_fkey" FOREIGN KEY ("agentId") REFERENCES "Agent"("id") ON DELETE SET NULL ON UPDATE CASCADE;
ALTER TABLE "Task" ADD CONSTRAINT "Task_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- A creation's task: nothing wrote this column before, so a value naming no task (one brought
-- in by hand) pointed nowhere and is cleared rather than refused.
UPDATE "Creation" SET "taskId" = NULL WHERE "taskId" IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "Task" WHERE "Task"."id" = "Creation"."taskId");
CREATE INDEX "Creation_taskId_idx" ON "Creation"("taskId");
ALTER TABLE "Creation" ADD CONSTRAINT "Creation_taskId_fkey" FOREIGN KEY ("taskId") REFERENCES "Task"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- Settling and start-up recovery find the unsettled tasks made by themselves.
CREATE INDEX "Task_unsettled_idx" ON "Task"("instance") WHERE "messageId" IS NULL AND "status" IN ('pending', 'running');

-- Progress is a fraction.
ALTER TABLE "Task" ADD CONSTRAINT "Task_progress_fraction" CHECK ("progress" >= 0 AND "progress" <= 1);
