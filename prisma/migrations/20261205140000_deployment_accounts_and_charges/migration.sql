-- Deployments against hostile input and races: an update skipped (with why) when what it carried
-- cannot be recorded, so it never blocks the ones after it; the platform's id of the account a
-- deployment's secrets open, held by one deployment only (one bot token on one agent); and each
-- tool call's hold counted against its deployment's daily manna cap, in the hold's transaction.

-- AlterEnum
ALTER TYPE "DeploymentUpdateStatus" ADD VALUE 'skipped';

-- AlterTable
ALTER TABLE "Deployment" ADD COLUMN     "accountId" TEXT;

-- AlterTable
ALTER TABLE "DeploymentUpdate" ADD COLUMN     "note" TEXT;

-- CreateTable
CREATE TABLE "DeploymentCharge" (
    "taskId" TEXT NOT NULL,
    "deploymentId" TEXT NOT NULL,
    "day" DATE NOT NULL,
    "amount" DECIMAL(20,4) NOT NULL,

    CONSTRAINT "DeploymentCharge_pkey" PRIMARY KEY ("taskId")
);

-- CreateIndex
CREATE INDEX "DeploymentCharge_deploymentId_day_idx" ON "DeploymentCharge"("deploymentId", "day");

-- CreateIndex
CREATE UNIQUE INDEX "Deployment_platform_accountId_key" ON "Deployment"("platform", "accountId");

-- AddForeignKey
ALTER TABLE "DeploymentCharge" ADD CONSTRAINT "DeploymentCharge_deploymentId_fkey" FOREIGN KEY ("deploymentId") REFERENCES "Deployment"("id") ON DELETE CASCADE ON UPDATE CASCADE;
