-- Conversations: message order, status and token usage of replies.

-- CreateEnum
CREATE TYPE "MessageStatus" AS ENUM ('streaming', 'complete', 'failed', 'cancelled');

-- DropIndex
DROP INDEX "Message_sessionId_createdAt_idx";

-- AlterTable
ALTER TABLE "Message" ADD COLUMN     "completionTokens" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "error" TEXT,
ADD COLUMN     "ordinal" SERIAL NOT NULL,
ADD COLUMN     "promptId" TEXT,
ADD COLUMN     "promptTokens" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "status" "MessageStatus" NOT NULL DEFAULT 'complete';

-- CreateIndex
CREATE UNIQUE INDEX "Message_sessionId_ordinal_key" ON "Message"("sessionId", "ordinal");

-- Replies still streaming are few at any time; this finds them after a crash without a scan.
CREATE INDEX "Message_streaming_idx" ON "Message"("id") WHERE "status" = 'streaming';
