import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/** One MCP session: its protocol server, its transport, and the key it was opened with (and stays bound to). */
export interface McpSession {
  id: string;
  keyId: string;
  server: McpServer;
  transport: StreamableHTTPServerTransport;
  idle: NodeJS.Timeout;
  /** POSTs whose responses are still being written (a tool call under way). */
  answering: number;
  /** Its key was deleted: it closes once its calls under way have answered. */
  revoked: boolean;
}

/**
 * The MCP sessions open on this instance, by id and by API key: a key's deletion closes its
 * sessions as soon as the calls under way have answered (each of them is a watch or a read the
 * same deletion ends, so they answer at once, with the reason), and a session left without requests for `idleMs` is closed, so that a client that
 * went away without `DELETE /mcp` does not hold its memory for ever.
 */
export function mcpSessions(options: { maxPerKey: number; idleMs: number }) {
  const byId = new Map<string, McpSession>();
  const byKey = new Map<string, Set<McpSession>>();

  const close = (session: McpSession) => {
    if (byId.get(session.id) !== session) return;
    byId.delete(session.id);
    byKey.get(session.keyId)?.delete(session);
    if (byKey.get(session.keyId)?.size === 0) byKey.delete(session.keyId);
    clearTimeout(session.idle);
    // Closing the server closes its transport: its streams end and its calls under way are aborted.
    void session.server.close().catch(() => {});
  };

  const idleTimer = (id: string) => setTimeout(() => byId.has(id) && close(byId.get(id)!), options.idleMs).unref();

  return {
    /** Whether this key may open one more session. */
    hasRoomFor: (keyId: string) => (byKey.get(keyId)?.size ?? 0) < options.maxPerKey,

    add(session: Omit<McpSession, 'idle' | 'answering' | 'revoked'>) {
      const added = { ...session, idle: idleTimer(session.id), answering: 0, revoked: false };
      byId.set(added.id, added);
      byKey.set(added.keyId, (byKey.get(added.keyId) ?? new Set()).add(added));
    },

    /** The session named, if it is open and was opened with this key; its idle clock starts again. */
    get(id: string, keyId: string): McpSession | null {
      const session = byId.get(id);
      if (!session || session.keyId !== keyId) return null;
      session.idle.refresh();
      return session;
    },

    /** A POST to the session is being answered; the function returned says it has been. */
    answering(session: McpSession): () => void {
      session.answering += 1;
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        session.answering -= 1;
        if (session.revoked && session.answering === 0) close(session);
      };
    },

    /** Forgets a session its transport closed (the client's `DELETE /mcp`). */
    closed(id: string) {
      const session = byId.get(id);
      if (session) close(session);
    },

    closeKey(keyId: string) {
      for (const session of [...(byKey.get(keyId) ?? [])]) {
        session.revoked = true;
        if (session.answering === 0) close(session);
      }
    },

    closeAll() {
      for (const session of [...byId.values()]) close(session);
    },

    get size() {
      return byId.size;
    },
  };
}

export type McpSessions = ReturnType<typeof mcpSessions>;
