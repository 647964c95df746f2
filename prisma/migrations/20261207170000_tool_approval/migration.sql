-- Which tools' calls wait for the agent's owner to approve them, and for how long (issue 52).

-- AlterTable
ALTER TABLE "Agent" ADD COLUMN     "toolApproval" JSONB NOT NULL DEFAULT '{}';

-- A reply's tool call may wait for its payer's approval; the reply keeps what it needs to go on.
CREATE TYPE "ToolApprovalState" AS ENUM ('requested', 'approved', 'denied', 'expired');

ALTER TYPE "TaskStatus" ADD VALUE 'awaiting_approval' BEFORE 'running';

ALTER TABLE "Task" ADD COLUMN     "approval" "ToolApprovalState";

ALTER TABLE "Message" ADD COLUMN     "resumeState" JSONB;
