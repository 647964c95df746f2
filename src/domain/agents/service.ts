import { badInput, conflict, forbidden, notFound, unprocessable } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { nonEmptyPatch, parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { isVisibleTo } from '../core/visibility.ts';
import { parseAgentFilter, type agentFilterSchema, type RawFilter } from '../discovery/filters.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import { agentCreateSchema, agentPatchSchema, type AgentPatch } from './inputs.ts';
import type { AgentPage, AgentQuery, AgentRefused, AgentStore, AgentWithKey } from './store.ts';

export type { AgentQuery, AgentWithKey } from './store.ts';

export const AGENT_NOT_FOUND = 'Agent not found';
export const AGENT_KEY_TAKEN = 'An agent with this key already exists';

/** An MCP tool's name as the model calls it: a server's name, `__`, the tool's name; 64 characters at most. */
const MCP_FUNCTION_NAME = /^(?=.{4,64}$)[a-z0-9][a-z0-9_-]{0,23}__[A-Za-z0-9_-]+$/;
const UNKNOWN_APPROVAL_TOOL = (key: string) =>
  `unknown tool "${key}" (see the tools list; an MCP tool is named <server>__<tool>, on a server of yours)`;

/** A private persona is shown only to the agent's owner. */
export const visiblePersona = (viewer: Viewer | null, agent: { persona: string; isPersonaPublic: boolean; ownerId: string }) =>
  agent.isPersonaPublic || viewer?.id === agent.ownerId ? agent.persona : null;

export const canReadAgent = (viewer: Viewer | null, agent: { public: boolean; ownerId: string }) =>
  isVisibleTo(viewer, agent, agent.ownerId);

export function agentService(store: AgentStore, tools: ToolRegistry, limits: { maxAgentsPerUser: number }) {
  /**
   * An approval rule names a registry tool by its key, or an MCP tool by the name the model calls
   * it (`<server>__<tool>`) with the server one of the caller's own: the tool itself need not be
   * enabled yet, nor listed by its server now.
   */
  async function checkApprovalKeys(viewer: Viewer, keys: string[]) {
    const mcp = keys.filter((key) => !tools.canEnable(key));
    const malformed = mcp.find((key) => !MCP_FUNCTION_NAME.test(key));
    if (malformed !== undefined) throw badInput(UNKNOWN_APPROVAL_TOOL(malformed), ['toolApproval', 'tools', malformed]);
    if (!mcp.length) return;
    const own = await store.ownMcpServerNames(viewer.id, [...new Set(mcp.map((key) => key.split('__')[0]!))]);
    const stranger = mcp.find((key) => !own.has(key.split('__')[0]!));
    if (stranger !== undefined) throw badInput(UNKNOWN_APPROVAL_TOOL(stranger), ['toolApproval', 'tools', stranger]);
  }

  /** References inside agent input must point at things that exist and the caller may use. */
  async function checkReferences(viewer: Viewer, input: AgentPatch) {
    for (const key of Object.keys(input.tools ?? {})) {
      if (!tools.canEnable(key)) throw badInput(`unknown tool "${key}" (see the tools list)`, ['tools', key]);
    }
    await checkApprovalKeys(viewer, Object.keys(input.toolApproval?.tools ?? {}));
    // Only the owner's own servers: a server's sealed headers and its price are its owner's to use.
    const servers = input.mcpTools?.map((t) => t.serverId) ?? [];
    if (servers.length) {
      const own = await store.ownMcpServers(viewer.id, servers);
      const stranger = servers.findIndex((id) => !own.has(id));
      if (stranger >= 0) throw badInput(`MCP server ${servers[stranger]} not found among yours`, ['mcpTools', stranger, 'serverId']);
    }
    const loras = input.models?.map((m) => m.lora) ?? [];
    if (loras.length) {
      const ids = await store.usableModels(viewer, loras);
      const missing = loras.findIndex((id) => !ids.has(id));
      if (missing >= 0) throw badInput('model not found or not usable by you', ['models', missing, 'lora']);
    }
  }

  return {
    /** Agents the viewer may read (their own and public ones), narrowed by `filter`, newest first; `page` is the connection's window. */
    list(viewer: Viewer, filter: RawFilter<typeof agentFilterSchema>, page: AgentPage) {
      return store.list(viewer, parseAgentFilter(filter), page);
    },

    async get(viewer: Viewer, id: string, query?: AgentQuery): Promise<AgentWithKey> {
      const agent = canNameARow(id) ? await store.find(id, query) : null;
      if (!agent) throw notFound(AGENT_NOT_FOUND);
      if (!canReadAgent(viewer, agent)) throw forbidden('You do not have access to this agent');
      return agent;
    },

    async create(viewer: Viewer, raw: unknown, query?: AgentQuery): Promise<AgentWithKey> {
      const input = parseInput(agentCreateSchema, raw);
      await checkReferences(viewer, input);
      const made = await store.createWithin(viewer.id, limits.maxAgentsPerUser, input, query);
      if ('refused' in made) throw refusal(made, limits.maxAgentsPerUser);
      return made;
    },

    /**
     * Deletes an agent its owner no longer wants (see the store for what goes with it). Someone
     * else's private agent is not found; someone else's public one is forbidden.
     */
    async delete(viewer: Viewer, id: string): Promise<void> {
      const agent = canNameARow(id) ? await store.find(id) : null;
      if (!agent || !canReadAgent(viewer, agent)) throw notFound(AGENT_NOT_FOUND);
      if (agent.ownerId !== viewer.id) throw forbidden('Only the owner of this agent can delete it');
      await store.delete(id);
    },

    /** Only the fields present change; `llmSettings` and `toolApproval` are merged field by field. */
    async update(viewer: Viewer, id: string, raw: unknown, query?: AgentQuery): Promise<AgentWithKey> {
      const ownerId = canNameARow(id) ? await store.ownerOf(id) : null;
      if (!ownerId) throw notFound(AGENT_NOT_FOUND);
      if (ownerId !== viewer.id) throw forbidden('Only the owner of this agent can update it');
      const patch = nonEmptyPatch(parseInput(agentPatchSchema, raw), 'agent');
      await checkReferences(viewer, patch);
      const updated = await store.update(id, patch, query);
      if ('refused' in updated) throw refusal(updated, limits.maxAgentsPerUser);
      return updated;
    },
  };
}

/** Why a write saved no agent, as the caller is told: two agents (or an agent and a user) cannot share a key. */
const refusal = (why: AgentRefused, cap: number) =>
  why.refused === 'key-taken' ? conflict(AGENT_KEY_TAKEN) : unprocessable(`Agent limit reached: a user may own at most ${cap} agents`);

export type AgentService = ReturnType<typeof agentService>;
