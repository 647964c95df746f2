-- Agents at work: tool call ids, the message a ledger row belongs to, and agents' memories of users.

-- AlterTable
ALTER TABLE "ToolCall" ADD COLUMN     "callId" TEXT NOT NULL DEFAULT '';

-- AlterTable
ALTER TABLE "MannaLedger" ADD COLUMN     "messageId" TEXT;

-- CreateTable
CREATE TABLE "Memory" (
    "id" TEXT NOT NULL,
    "agentId" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "fact" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "sessionId" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Memory_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "Memory_agentId_userId_createdAt_idx" ON "Memory"("agentId", "userId", "createdAt");

-- CreateIndex
CREATE UNIQUE INDEX "Memory_agentId_userId_key_key" ON "Memory"("agentId", "userId", "key");

-- AddForeignKey
ALTER TABLE "MannaLedger" ADD CONSTRAINT "MannaLedger_messageId_fkey" FOREIGN KEY ("messageId") REFERENCES "Message"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Memory" ADD CONSTRAINT "Memory_agentId_fkey" FOREIGN KEY ("agentId") REFERENCES "Agent"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Memory" ADD CONSTRAINT "Memory_userId_fkey" FOREIGN KEY ("userId") REFERENCES "User"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Refunds find the hold of a tool call by its id.
CREATE INDEX "MannaLedger_toolCallId_idx" ON "MannaLedger"("toolCallId");

-- A session's spent manna only grows with holds and shrinks with their refunds.
ALTER TABLE "Session" ADD CONSTRAINT "Session_mannaSpent_nonnegative" CHECK ("mannaSpent" >= 0);
