import type { Db } from '../../db/database.ts';
import { isRecordGone, isUniqueViolation } from '../core/stores/prisma-errors.ts';
import { toolApprovalOf } from '../tools/approval.ts';
import type { McpServerStore, McpServerView } from './store.ts';

const select = {
  id: true,
  userId: true,
  name: true,
  url: true,
  headers: true,
  authorization: true,
  pricePerCall: true,
  createdAt: true,
  updatedAt: true,
} as const;

const serverView = (row: {
  id: string;
  userId: string;
  name: string;
  url: string;
  headers: unknown;
  authorization: string | null;
  pricePerCall: number;
  createdAt: Date;
  updatedAt: Date;
}): McpServerView => ({
  id: row.id,
  userId: row.userId,
  name: row.name,
  url: row.url,
  headers: (row.headers ?? {}) as Record<string, string>,
  hasAuthorization: row.authorization !== null,
  pricePerCall: row.pricePerCall,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
});

/** The write, or null when it broke the owner's one name per server. */
async function unlessNameTaken<T>(write: () => Promise<T>): Promise<T | null> {
  try {
    return await write();
  } catch (e) {
    if (isUniqueViolation(e)) return null;
    throw e;
  }
}

export function prismaMcpServerStore(db: Db): McpServerStore {
  return {
    count: (userId) => db.mcpServer.count({ where: { userId } }),
    async create(row) {
      const made = await unlessNameTaken(() => db.mcpServer.create({ data: row, select }));
      return made && serverView(made);
    },
    async list(userId) {
      return (await db.mcpServer.findMany({ where: { userId }, orderBy: [{ name: 'asc' }], select })).map(serverView);
    },
    async byId(id) {
      const row = await db.mcpServer.findUnique({ where: { id }, select });
      return row && serverView(row);
    },
    async update(id, changes) {
      try {
        const changed = await unlessNameTaken(() => db.mcpServer.update({ where: { id }, data: changes, select }));
        return changed && serverView(changed);
      } catch (e) {
        if (isRecordGone(e)) return 'gone';
        throw e;
      }
    },
    async approvalRulesNaming(userId, serverName) {
      const agents = await db.agent.findMany({
        where: { ownerId: userId },
        orderBy: { name: 'asc' },
        select: { name: true, toolApproval: true },
      });
      return agents.flatMap(({ name, toolApproval }) =>
        Object.keys(toolApprovalOf(toolApproval).tools)
          .filter((tool) => tool.startsWith(`${serverName}__`))
          .map((tool) => ({ agent: name, tool })),
      );
    },
    async remove(id) {
      await db.mcpServer.deleteMany({ where: { id } });
    },
    async sealedAuthorization(id) {
      return (await db.mcpServer.findUnique({ where: { id }, select: { authorization: true } }))?.authorization ?? null;
    },
    async enabledOn(agentId) {
      const rows = await db.agentMcpTool.findMany({
        where: { agentId },
        orderBy: [{ serverId: 'asc' }, { tool: 'asc' }],
        select: { tool: true, server: { select } },
      });
      return rows.map((r) => ({ server: serverView(r.server), tool: r.tool }));
    },
  };
}

/** The servers' sealed authorization headers as the key's upkeep reseals them (`deployments/sealing.ts`): one a row, sealed for its id. */
export function mcpServerSealedRows(db: Db) {
  return {
    count: () => db.mcpServer.count({ where: { authorization: { not: null } } }),
    async sealedAfter(afterId: string | null, limit: number) {
      const rows = await db.mcpServer.findMany({
        where: { authorization: { not: null }, ...(afterId ? { id: { gt: afterId } } : {}) },
        orderBy: { id: 'asc' },
        take: limit,
        select: { id: true, authorization: true },
      });
      return rows.map((r) => ({ id: r.id, sealed: r.authorization }));
    },
    async replaceSealed(id: string, from: string, to: string) {
      const { count } = await db.mcpServer.updateMany({ where: { id, authorization: from }, data: { authorization: to } });
      return count > 0;
    },
  };
}
