import type { Db } from '../../db/database.ts';
import type { Agent, Prisma } from '../../generated/prisma/client.ts';
import { badInput, conflict, forbidden, notFound, unprocessable } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { isUniqueViolation } from '../core/stores/prisma-errors.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import { nonEmptyPatch, parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { agentListWhere } from '../discovery/filters.ts';
import { newestFirst } from '../core/ordering.ts';
import { isVisibleTo, visibleToFilter } from '../core/visibility.ts';
import { agentCreateSchema, agentPatchSchema, type AgentPatch } from './inputs.ts';

export const AGENT_NOT_FOUND = 'Agent not found';
export const AGENT_KEY_TAKEN = 'An agent with this key already exists';

export type AgentQuery = { include?: Prisma.AgentInclude };
/** An agent with its creator row, whose username is the agent's `key`. */
export type AgentWithKey = Agent & { user: { username: string } };

/** A private persona is shown only to the agent's owner. */
export const visiblePersona = (viewer: Viewer | null, agent: Pick<Agent, 'persona' | 'isPersonaPublic' | 'ownerId'>) =>
  agent.isPersonaPublic || viewer?.id === agent.ownerId ? agent.persona : null;

export const canReadAgent = (viewer: Viewer | null, agent: Pick<Agent, 'public' | 'ownerId'>) => isVisibleTo(viewer, agent, agent.ownerId);

const withKey = (query: AgentQuery = {}) => ({ include: { user: true, ...query.include } }) as const;

export function agentService(db: Db, tools: ToolRegistry, limits: { maxAgentsPerUser: number }) {
  /** References inside agent input must point at things that exist and the caller may use. */
  async function checkReferences(viewer: Viewer, input: AgentPatch) {
    for (const key of Object.keys(input.tools ?? {})) {
      if (!tools.canEnable(key)) throw badInput(`unknown tool "${key}" (see the tools list)`, ['tools', key]);
    }
    const loras = input.models?.map((m) => m.lora) ?? [];
    if (loras.length) {
      const found = await db.model.findMany({ where: { id: { in: loras }, ...visibleToFilter(viewer, 'userId') }, select: { id: true } });
      const ids = new Set(found.map((m) => m.id));
      const missing = loras.findIndex((id) => !ids.has(id));
      if (missing >= 0) throw badInput('model not found or not usable by you', ['models', missing, 'lora']);
    }
  }

  const columns = ({ key: _key, llmSettings: _llm, ...rest }: AgentPatch) => rest;

  return {
    /** Agents the viewer may read (their own and public ones), narrowed by `filter`, newest first; `page` is the connection's window. */
    list(viewer: Viewer, filter: Parameters<typeof agentListWhere>[1], page: Omit<Prisma.AgentFindManyArgs, 'where' | 'orderBy'>) {
      return db.agent.findMany({ ...page, where: agentListWhere(viewer, filter), orderBy: newestFirst });
    },

    async get(viewer: Viewer, id: string, query?: AgentQuery): Promise<AgentWithKey> {
      const agent = canNameARow(id) ? await db.agent.findUnique({ where: { id }, ...withKey(query) }) : null;
      if (!agent) throw notFound(AGENT_NOT_FOUND);
      if (!canReadAgent(viewer, agent)) throw forbidden('You do not have access to this agent');
      return agent;
    },

    async create(viewer: Viewer, raw: unknown, query?: AgentQuery): Promise<AgentWithKey> {
      const input = parseInput(agentCreateSchema, raw);
      await checkReferences(viewer, input);
      try {
        return await db.$transaction(async (tx) => {
          // One user's creations queue on their row, so concurrent ones cannot overshoot the cap.
          await tx.$queryRaw`SELECT 1 FROM "User" WHERE "id" = ${viewer.id} FOR UPDATE`;
          if ((await tx.agent.count({ where: { ownerId: viewer.id } })) >= limits.maxAgentsPerUser) {
            throw unprocessable(`Agent limit reached: a user may own at most ${limits.maxAgentsPerUser} agents`);
          }
          return tx.agent.create({
            data: {
              ...columns(input),
              name: input.name,
              llmSettings: input.llmSettings ?? {},
              owner: { connect: { id: viewer.id } },
              user: { create: { type: 'agent', username: input.key, userImage: input.image ?? null } },
            },
            ...withKey(query),
          });
        });
      } catch (e) {
        throw keyTakenOr(e);
      }
    },

    /** Only the fields present change; `llmSettings` is merged field by field. */
    async update(viewer: Viewer, id: string, raw: unknown, query?: AgentQuery): Promise<AgentWithKey> {
      const existing = canNameARow(id) ? await db.agent.findUnique({ where: { id }, select: { ownerId: true } }) : null;
      if (!existing) throw notFound(AGENT_NOT_FOUND);
      if (existing.ownerId !== viewer.id) throw forbidden('Only the owner of this agent can update it');
      const patch = nonEmptyPatch(parseInput(agentPatchSchema, raw), 'agent');
      await checkReferences(viewer, patch);
      try {
        return await db.$transaction(async (tx) => {
          // Merging llmSettings reads it and writes it back: the row lock makes concurrent PATCHes
          // of different settings apply one after the other instead of overwriting each other.
          const [current] = patch.llmSettings
            ? await tx.$queryRaw<{ llmSettings: object }[]>`SELECT "llmSettings" FROM "Agent" WHERE "id" = ${id} FOR UPDATE`
            : [];
          return tx.agent.update({
            where: { id },
            data: {
              ...columns(patch),
              llmSettings: patch.llmSettings && { ...current?.llmSettings, ...patch.llmSettings },
              ...(patch.key !== undefined || patch.image !== undefined
                ? { user: { update: { username: patch.key, userImage: patch.image } } }
                : {}),
            },
            ...withKey(query),
          });
        });
      } catch (e) {
        throw keyTakenOr(e);
      }
    },
  };
}

/** Two agents (or an agent and a user) cannot share a key: the unique index says so first. */
const keyTakenOr = (e: unknown) => (isUniqueViolation(e) ? conflict(AGENT_KEY_TAKEN) : e);

export type AgentService = ReturnType<typeof agentService>;
