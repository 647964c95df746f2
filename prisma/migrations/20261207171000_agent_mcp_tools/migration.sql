-- MCP servers' tools enabled on agents (issue 53): one row a tool, gone with its agent or its server.
-- CreateTable
CREATE TABLE "AgentMcpTool" (
    "agentId" TEXT NOT NULL,
    "serverId" TEXT NOT NULL,
    "tool" TEXT NOT NULL,

    CONSTRAINT "AgentMcpTool_pkey" PRIMARY KEY ("agentId","serverId","tool")
);

-- CreateIndex
CREATE INDEX "AgentMcpTool_serverId_idx" ON "AgentMcpTool"("serverId");

-- AddForeignKey
ALTER TABLE "AgentMcpTool" ADD CONSTRAINT "AgentMcpTool_agentId_fkey" FOREIGN KEY ("agentId") REFERENCES "Agent"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "AgentMcpTool" ADD CONSTRAINT "AgentMcpTool_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "McpServer"("id") ON DELETE CASCADE ON UPDATE CASCADE;
