-- Which tools' calls wait for the agent's owner to approve them, and for how long (issue 52).

-- AlterTable
ALTER TABLE "Agent" ADD COLUMN     "toolApproval" JSONB NOT NULL DEFAULT '{}';
