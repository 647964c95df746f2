-- Deployments that run: the owner's wish (`running`), why the last attempt failed, the account
-- the secrets open, and where reading the platform's updates resumes; the lease of the one
-- instance that reads them; the chats that became sessions; each update read, recorded with the
-- cursor that moved past it (answered exactly once); the people who write, as senders.

-- CreateEnum
CREATE TYPE "DeploymentUpdateStatus" AS ENUM ('received', 'answered', 'refused', 'failed');

-- AlterTable
ALTER TABLE "Deployment" ADD COLUMN     "account" TEXT,
ADD COLUMN     "cursor" TEXT,
ADD COLUMN     "lastError" TEXT,
ADD COLUMN     "running" BOOLEAN NOT NULL DEFAULT false;

-- CreateTable
CREATE TABLE "DeploymentLease" (
    "deploymentId" TEXT NOT NULL,
    "holder" TEXT NOT NULL,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "DeploymentLease_pkey" PRIMARY KEY ("deploymentId")
);

-- CreateTable
CREATE TABLE "DeploymentChat" (
    "id" TEXT NOT NULL,
    "deploymentId" TEXT NOT NULL,
    "conversationId" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "sessionId" TEXT,
    "windowStart" TIMESTAMP(3),
    "windowCount" INTEGER NOT NULL DEFAULT 0,
    "notices" JSONB NOT NULL DEFAULT '{}',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "DeploymentChat_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "DeploymentUpdate" (
    "id" TEXT NOT NULL,
    "seq" SERIAL NOT NULL,
    "deploymentId" TEXT NOT NULL,
    "eventId" TEXT NOT NULL,
    "conversationId" TEXT NOT NULL,
    "conversationTitle" TEXT NOT NULL,
    "conversationKind" TEXT NOT NULL,
    "messageRef" TEXT NOT NULL,
    "senderRef" TEXT NOT NULL,
    "senderName" TEXT NOT NULL,
    "text" TEXT NOT NULL,
    "status" "DeploymentUpdateStatus" NOT NULL DEFAULT 'received',
    "promptId" TEXT NOT NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "replyRefs" JSONB NOT NULL DEFAULT '[]',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "DeploymentUpdate_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "DeploymentSender" (
    "userId" TEXT NOT NULL,
    "platform" "DeploymentPlatform" NOT NULL,
    "externalId" TEXT NOT NULL,
    "name" TEXT NOT NULL,

    CONSTRAINT "DeploymentSender_pkey" PRIMARY KEY ("userId")
);

-- CreateIndex
CREATE INDEX "DeploymentChat_sessionId_idx" ON "DeploymentChat"("sessionId");

-- CreateIndex
CREATE UNIQUE INDEX "DeploymentChat_deploymentId_conversationId_key" ON "DeploymentChat"("deploymentId", "conversationId");

-- CreateIndex
CREATE INDEX "DeploymentUpdate_deploymentId_status_idx" ON "DeploymentUpdate"("deploymentId", "status");

-- CreateIndex
CREATE UNIQUE INDEX "DeploymentUpdate_deploymentId_eventId_key" ON "DeploymentUpdate"("deploymentId", "eventId");

-- CreateIndex
CREATE UNIQUE INDEX "DeploymentSender_platform_externalId_key" ON "DeploymentSender"("platform", "externalId");

-- AddForeignKey
ALTER TABLE "DeploymentLease" ADD CONSTRAINT "DeploymentLease_deploymentId_fkey" FOREIGN KEY ("deploymentId") REFERENCES "Deployment"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DeploymentChat" ADD CONSTRAINT "DeploymentChat_deploymentId_fkey" FOREIGN KEY ("deploymentId") REFERENCES "Deployment"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DeploymentChat" ADD CONSTRAINT "DeploymentChat_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DeploymentUpdate" ADD CONSTRAINT "DeploymentUpdate_deploymentId_fkey" FOREIGN KEY ("deploymentId") REFERENCES "Deployment"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DeploymentSender" ADD CONSTRAINT "DeploymentSender_userId_fkey" FOREIGN KEY ("userId") REFERENCES "User"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Secrets are sealed from now on. Rows written before could only hold them in clear: they are
-- dropped, and the deployment asks its owner to deploy again with them.
UPDATE "Deployment" SET "secrets" = '{}'::jsonb, "lastError" = 'Deployed before secrets were sealed: deploy it again with its secrets'
WHERE "secrets" <> '{}'::jsonb;
