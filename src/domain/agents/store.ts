import type { Db } from '../../db/database.ts';
import type { Agent, Prisma } from '../../generated/prisma/client.ts';
import { newestFirst } from '../core/ordering.ts';
import { isUniqueViolation } from '../core/stores/prisma-errors.ts';
import type { Viewer } from '../core/viewer.ts';
import { addCreator, renameCreator } from '../creators/store.ts';
import type { AgentFilter } from '../discovery/filters.ts';
import { agentListWhere, visibleToFilter } from '../discovery/store.ts';
import type { AgentPatch } from './inputs.ts';

/** What GraphQL (Pothos' `query`) and REST ask to have read along with an agent. */
export type AgentQuery = { include?: Prisma.AgentInclude };
/** An agent with its creator row, whose username is the agent's `key`. */
export type AgentWithKey = Agent & { user: { username: string } };
/** The connection's window of a list of agents. */
export type AgentPage = Omit<Prisma.AgentFindManyArgs, 'where' | 'orderBy'>;
/** Why a write saved no agent: its owner has as many as they may, or its key is another creator's username. */
export type AgentRefused = { refused: 'cap' } | { refused: 'key-taken' };

/** What a write gave; or, when the unique index on usernames refused its key, why it saved nothing. */
const keyTakenOr = <T>(write: Promise<T>) =>
  write.catch((e: unknown): AgentRefused => {
    if (isUniqueViolation(e)) return { refused: 'key-taken' };
    throw e;
  });

const withKey = (query: AgentQuery = {}) => ({ include: { user: true, ...query.include } }) as const;

/**
 * The agent's own columns of a patch: its key and image live on its creator row, its settings are
 * merged, and its MCP tools are rows of their own, replaced as a whole when given.
 */
const columns = ({ key: _key, llmSettings: _llm, toolApproval: _approval, mcpTools: _mcpTools, ...rest }: AgentPatch) => rest;

/** The MCP tools of a patch as rows of the agent: on an update, in place of those it had. */
const mcpToolRows = ({ mcpTools }: AgentPatch, replacing: boolean) =>
  mcpTools && {
    mcpTools: { ...(replacing && { deleteMany: {} }), create: mcpTools.map((t) => ({ serverId: t.serverId, tool: t.tool })) },
  };

/** Agents on Prisma: every read returns the agent with its key, and what `query` asks for. */
export function agentStore(db: Db) {
  const rows = {
    /** Agents the viewer may read, narrowed by `filter`, newest first. */
    list: (viewer: Viewer, filter: AgentFilter, page: AgentPage) =>
      db.agent.findMany({ ...page, where: agentListWhere(viewer, filter), orderBy: newestFirst }),

    find: (id: string, query?: AgentQuery): Promise<AgentWithKey | null> => db.agent.findUnique({ where: { id }, ...withKey(query) }),

    ownerOf: async (id: string) => (await db.agent.findUnique({ where: { id }, select: { ownerId: true } }))?.ownerId ?? null,

    /** Which of these MCP servers are the user's own. */
    async ownMcpServers(userId: string, ids: string[]) {
      const found = await db.mcpServer.findMany({ where: { id: { in: ids }, userId }, select: { id: true } });
      return new Set(found.map((s) => s.id));
    },

    /** Which of these names are of MCP servers of the user's own. */
    async ownMcpServerNames(userId: string, names: string[]) {
      const found = await db.mcpServer.findMany({ where: { name: { in: names }, userId }, select: { name: true } });
      return new Set(found.map((s) => s.name));
    },

    /** Which of these models exist and the viewer may use. */
    async usableModels(viewer: Viewer, ids: string[]) {
      const found = await db.model.findMany({ where: { id: { in: ids }, ...visibleToFilter(viewer, 'userId') }, select: { id: true } });
      return new Set(found.map((m) => m.id));
    },

    /**
     * Creates an agent and its creator row, unless its owner already has `cap` (or its key is
     * taken): then why not. One user's creations queue on their row, so concurrent ones cannot
     * overshoot the cap.
     */
    createWithin: (ownerId: string, cap: number, input: AgentPatch & { name: string; key: string }, query?: AgentQuery) =>
      db.$transaction(async (tx): Promise<AgentWithKey | AgentRefused> => {
        await tx.$queryRaw`SELECT 1 FROM "User" WHERE "id" = ${ownerId} FOR UPDATE`;
        if ((await tx.agent.count({ where: { ownerId } })) >= cap) return { refused: 'cap' };
        const face = await addCreator(tx, { type: 'agent', username: input.key, userImage: input.image ?? null });
        return tx.agent.create({
          data: {
            ...columns(input),
            ...mcpToolRows(input, false),
            name: input.name,
            llmSettings: input.llmSettings ?? {},
            toolApproval: input.toolApproval ?? {},
            owner: { connect: { id: ownerId } },
            user: { connect: { id: face.id } },
          },
          ...withKey(query),
        });
      }),

    /**
     * Deletes the agent with what is only its: its triggers, its deployments (their secrets with
     * them) and its memories go with its row, by the schema's cascades, in the one statement. Its
     * creator row stays, so the messages it wrote keep their sender; sessions stay with their
     * owners and lose it from their agents; creations and concepts made with it stay, without it.
     */
    delete: async (id: string) => {
      await db.agent.deleteMany({ where: { id } });
    },

    /** Changes only the fields present (unless the new key is taken); `llmSettings` and `toolApproval` are merged field by field. */
    update: (id: string, patch: AgentPatch, query?: AgentQuery) =>
      db.$transaction(async (tx): Promise<AgentWithKey> => {
        // Merging settings reads them and writes them back: the row lock makes concurrent PATCHes
        // of different settings apply one after the other instead of overwriting each other.
        const [current] =
          patch.llmSettings || patch.toolApproval
            ? await tx.$queryRaw<
                { llmSettings: object; toolApproval: object }[]
              >`SELECT "llmSettings", "toolApproval" FROM "Agent" WHERE "id" = ${id} FOR UPDATE`
            : [];
        // The key and the image live on the creator row, whose owner changes them; first, so the
        // agent read back below carries them.
        if (patch.key !== undefined || patch.image !== undefined)
          await renameCreator(tx, id, { username: patch.key, userImage: patch.image });
        return tx.agent.update({
          where: { id },
          data: {
            ...columns(patch),
            ...mcpToolRows(patch, true),
            llmSettings: patch.llmSettings && { ...current?.llmSettings, ...patch.llmSettings },
            toolApproval: patch.toolApproval && { ...current?.toolApproval, ...patch.toolApproval },
          },
          ...withKey(query),
        });
      }),
  };
  // A key taken is one of the store's answers, not an error a rule must recognise.
  return {
    ...rows,
    createWithin: (...write: Parameters<typeof rows.createWithin>) => keyTakenOr(rows.createWithin(...write)),
    update: (...write: Parameters<typeof rows.update>) => keyTakenOr(rows.update(...write)),
  };
}

export type AgentStore = ReturnType<typeof agentStore>;
