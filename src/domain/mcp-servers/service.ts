import { badInput, conflict, notFound, unavailable, unprocessable } from '../core/errors.ts';
import { canNameARow, newId } from '../core/ids.ts';
import type { AddressGuard } from '../core/outbound.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import {
  AUTHORIZATION,
  createMcpServerInput,
  type CreateMcpServerInput,
  MOST_HEADERS,
  updateMcpServerInput,
  type UpdateMcpServerInput,
} from './inputs.ts';
import { type McpClients, type McpEndpoint, McpServerFailed, type McpTool, type Sealer } from './ports.ts';
import type { McpServerStore, McpServerView } from './store.ts';

export const MCP_SERVER_NOT_FOUND = 'MCP server not found';

export interface McpServerLimits {
  perUser: number;
}

const nameTaken = (name: string) => conflict(`You already have an MCP server named ${name}`);

/** How to reach a server: its headers, and its authorization header opened (unavailable, saying why, when it cannot be). */
export function mcpEndpoint(store: Pick<McpServerStore, 'sealedAuthorization'>, sealer: Sealer) {
  return async (server: McpServerView): Promise<McpEndpoint> => {
    const sealed = server.hasAuthorization ? await store.sealedAuthorization(server.id) : null;
    const headers = { ...server.headers };
    if (sealed) {
      if (sealer.problem) throw unavailable(sealer.problem);
      try {
        headers[AUTHORIZATION] = sealer.open(sealed, server.id);
      } catch {
        throw unavailable(
          `The authorization header kept for the MCP server ${server.name} cannot be opened here (sealed with a key this service does not have): set it again`,
        );
      }
    }
    return { id: server.id, url: server.url, headers, version: server.updatedAt.toISOString() };
  };
}

/**
 * MCP servers a user registers (`docs/mcp.md`): each one's URL is checked by the shared guard of
 * users' addresses when given, its authorization header sealed for its row and never shown
 * again; only its owner sees or changes it (another user's is "not found", as if it were not there).
 */
export function mcpServerService(deps: {
  store: McpServerStore;
  sealer: Sealer;
  guard: AddressGuard;
  clients: McpClients;
  limits: McpServerLimits;
}) {
  const { store, sealer, guard, clients } = deps;

  async function own(viewer: Viewer, id: string): Promise<McpServerView> {
    const row = canNameARow(id) ? await store.byId(id) : null;
    if (!row || row.userId !== viewer.id) throw notFound(MCP_SERVER_NOT_FOUND);
    return row;
  }

  async function checkUrl(url: string) {
    const refusal = await guard.refusal(url);
    if (refusal) throw badInput(refusal, ['url']);
  }

  /** The authorization header sealed for row `id`; the sealer is asked only when there is one. */
  function seal(value: string, id: string) {
    if (sealer.problem) throw unavailable(sealer.problem);
    return sealer.seal(value, id);
  }

  const endpointOf = mcpEndpoint(store, sealer);

  /**
   * Approval rules name a server's tools by its name (`<server>__<tool>`, as the model calls
   * them): a new name would let those calls run unasked, so the rules are changed first.
   */
  async function checkRenamable(viewer: Viewer, server: McpServerView) {
    const rules = await store.approvalRulesNaming(viewer.id, server.name);
    if (!rules.length) return;
    const named = rules.map((r) => `${r.agent} (${r.tool})`).join(', ');
    throw conflict(
      `The approval rules of your agents name this server's tools by its name: ${named}. Change those rules first, or their calls would run without asking`,
    );
  }

  return {
    async create(viewer: Viewer, raw: CreateMcpServerInput): Promise<McpServerView> {
      const input = parseInput(createMcpServerInput, raw);
      const { [AUTHORIZATION]: authorization, ...headers } = input.headers ?? {};
      await checkUrl(input.url);
      if ((await store.count(viewer.id)) >= deps.limits.perUser)
        throw unprocessable(`MCP server limit reached: a user may register at most ${deps.limits.perUser}`);
      const id = newId();
      const made = await store.create({
        id,
        userId: viewer.id,
        name: input.name,
        url: input.url,
        headers,
        authorization: authorization === undefined ? null : seal(authorization, id),
        pricePerCall: input.pricePerCall ?? 0,
      });
      if (!made) throw nameTaken(input.name);
      return made;
    },

    list: (viewer: Viewer) => store.list(viewer.id),

    get: own,

    async update(viewer: Viewer, id: string, raw: UpdateMcpServerInput): Promise<McpServerView> {
      const input = parseInput(updateMcpServerInput, raw);
      const server = await own(viewer, id);
      if (input.name !== undefined && input.name !== server.name) await checkRenamable(viewer, server);
      if (input.url !== undefined) await checkUrl(input.url);
      let headers: Record<string, string> | undefined;
      let authorization: string | null | undefined;
      if (input.headers) {
        const { [AUTHORIZATION]: named, ...rest } = input.headers;
        headers = { ...server.headers };
        for (const [header, value] of Object.entries(rest)) {
          if (value === null) delete headers[header];
          else headers[header] = value;
        }
        const keepsAuthorization = named === undefined ? server.hasAuthorization : named !== null;
        if (Object.keys(headers).length + (keepsAuthorization ? 1 : 0) > MOST_HEADERS)
          throw badInput(`must leave at most ${MOST_HEADERS} headers`, ['headers']);
        authorization = named === undefined ? undefined : named === null ? null : seal(named, id);
      }
      const changed = await store.update(id, {
        name: input.name,
        url: input.url,
        headers,
        authorization,
        pricePerCall: input.pricePerCall,
      });
      if (changed === 'gone') throw notFound(MCP_SERVER_NOT_FOUND);
      if (!changed) throw nameTaken(input.name!);
      clients.forget(id);
      return changed;
    },

    async remove(viewer: Viewer, id: string): Promise<string> {
      await own(viewer, id);
      await store.remove(id);
      clients.forget(id);
      return id;
    },

    /** The server's tools with their JSON Schemas, as it lists them (kept a while); unavailable, with the reason, when it cannot be used. */
    async tools(viewer: Viewer, id: string): Promise<McpTool[]> {
      const server = await own(viewer, id);
      try {
        return await clients.tools(await endpointOf(server));
      } catch (e) {
        if (e instanceof McpServerFailed) throw unavailable(`The MCP server ${server.name} could not be used: ${e.message}`);
        throw e;
      }
    },
  };
}

export type McpServerService = ReturnType<typeof mcpServerService>;
