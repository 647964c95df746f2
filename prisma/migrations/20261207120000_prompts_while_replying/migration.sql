-- What a prompt does while an agent of its session is still replying (reject, enqueue, interrupt,
-- rollback), the session's default, and what a newer prompt asked of a reply still being written.

-- CreateEnum
CREATE TYPE "WhileReplying" AS ENUM ('reject', 'enqueue', 'interrupt', 'rollback');

-- CreateEnum
CREATE TYPE "ReplyStop" AS ENUM ('interrupt', 'rollback');

-- AlterEnum
ALTER TYPE "MessageStatus" ADD VALUE 'interrupted';

-- AlterTable
ALTER TABLE "Session" ADD COLUMN     "whileReplying" "WhileReplying" NOT NULL DEFAULT 'enqueue';

-- AlterTable
ALTER TABLE "Message" ADD COLUMN     "stopRequest" "ReplyStop";

-- Every prompt to a session looks for its replies still being written (what `while_replying`
-- decides about): few rows, so a partial index by session, as recovery has by instance.
CREATE INDEX "Message_streaming_session_idx" ON "Message"("sessionId") WHERE "status" = 'streaming';
