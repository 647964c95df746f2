import type { Sealer } from '../../../src/domain/mcp-servers/ports.ts';
import type { McpServerStore, McpServerView } from '../../../src/domain/mcp-servers/store.ts';

/** A server as the in-memory store keeps it: the view's fields and the sealed authorization. */
interface Row extends Omit<McpServerView, 'hasAuthorization'> {
  authorization: string | null;
}

/** MCP servers in memory, for the rules test; `rows` shows what was stored. One name per owner, as the table's unique index. */
export function memoryMcpServerStore() {
  const rows = new Map<string, Row>();
  /** Approval rules of the owners' agents, as the agents' rows would hold them. */
  const rules: { userId: string; agent: string; tool: string }[] = [];
  const view = ({ authorization, ...row }: Row): McpServerView => ({
    ...row,
    headers: { ...row.headers },
    hasAuthorization: authorization !== null,
  });
  const taken = (userId: string, name: string, except?: string) =>
    [...rows.values()].some((r) => r.userId === userId && r.name === name && r.id !== except);
  const store: McpServerStore = {
    count: async (userId) => [...rows.values()].filter((r) => r.userId === userId).length,
    async create(row) {
      if (taken(row.userId, row.name)) return null;
      const at = new Date();
      const stored: Row = { ...row, headers: { ...row.headers }, createdAt: at, updatedAt: at };
      rows.set(row.id, stored);
      return view(stored);
    },
    list: async (userId) =>
      [...rows.values()]
        .filter((r) => r.userId === userId)
        .sort((a, b) => a.name.localeCompare(b.name))
        .map(view),
    byId: async (id) => {
      const row = rows.get(id);
      return row ? view(row) : null;
    },
    async update(id, changes) {
      const row = rows.get(id);
      if (!row) return 'gone';
      if (changes.name !== undefined && taken(row.userId, changes.name, id)) return null;
      for (const [key, value] of Object.entries(changes)) if (value !== undefined) Object.assign(row, { [key]: value });
      row.updatedAt = new Date();
      return view(row);
    },
    async remove(id) {
      rows.delete(id);
    },
    sealedAuthorization: async (id) => rows.get(id)?.authorization ?? null,
    approvalRulesNaming: async (userId, serverName) =>
      rules.filter((r) => r.userId === userId && r.tool.startsWith(`${serverName}__`)).map(({ agent, tool }) => ({ agent, tool })),
    // Agents are not kept here: the rules of their tools are tested on the app (test/mcp/agent-tools.test.ts).
    enabledOn: async () => [],
  };
  return { store, rows, rules };
}

/** Seals by writing the row it is bound to beside the text, so a test can tell what was sealed for which row. */
export function memoryMcpSealer(problem: string | null = null): Sealer {
  return {
    problem,
    seal: (plain, boundTo) => `sealed(${boundTo}):${Buffer.from(plain).toString('base64')}`,
    open(value, boundTo) {
      const prefix = `sealed(${boundTo}):`;
      if (!value.startsWith(prefix)) throw new Error('sealed for another row');
      return Buffer.from(value.slice(prefix.length), 'base64').toString();
    },
  };
}
