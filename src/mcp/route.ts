import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { McpConfig } from '../config.ts';
import type { Services } from '../domain/services.ts';
import { type McpSession, type McpSessions, mcpSessions } from './sessions.ts';
import { registerTools } from './tools.ts';

/** What parley calls itself to MCP clients. */
const SERVER_INFO = { name: 'parley', version: '0.1.0' };

/** A refusal before the protocol's transport has the request: JSON-RPC's error body, as the transport's own refusals are. */
function refuse(reply: FastifyReply, status: number, message: string) {
  return reply.code(status).send({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

/**
 * `/mcp`: parley's agents served to any MCP client over Streamable HTTP (`docs/mcp.md`). Every
 * request carries an API key (`X-Api-Key` or `Authorization: Bearer`, checked by `http/auth.ts`
 * as for REST), and a session stays with the key that opened it: another key, even the same
 * user's, does not find it. A deleted key closes its sessions at once, on every instance (the
 * bus carries the revocation), as it ends SSE streams and sockets.
 */
export function mcpRoute(http: FastifyInstance, services: Services, config: McpConfig) {
  const sessions = mcpSessions({ maxPerKey: config.maxSessionsPerKey, idleMs: config.sessionIdleS * 1000 });
  const stopListening = services.bus.onKeyRevoked((keyId) => sessions.closeKey(keyId));
  http.addHook('preClose', async () => {
    stopListening();
    sessions.closeAll();
  });
  http.route({
    url: '/mcp',
    method: ['GET', 'POST', 'DELETE'],
    config: { bearer: true },
    handler: async (request, reply) => {
      const keyId = request.viewer.keyId;
      if (!keyId) return refuse(reply, 401, 'An API key is needed');
      const found = await transportFor(request, reply, { services, sessions, keyId });
      if (!found) return reply;
      // A call's answer is written before a deletion of the key closes its session (a GET's stream is never an answer).
      if (found.session && request.method === 'POST') reply.raw.once('close', sessions.answering(found.session));
      // The transport writes the response itself (JSON or a stream of events) on Node's objects.
      keepReplyHeaders(reply);
      reply.hijack();
      await found.transport.handleRequest(request.raw, reply.raw, request.body);
      return reply;
    },
  });
}

/**
 * What the hooks every route goes through put on the reply (CORS, `x-request-id`, the rate
 * limit's headers) is written only when Fastify sends it; a hijacked reply's answer is written by
 * the transport on Node's response, so they are set there first (helmet's security headers are
 * there already). The transport's own headers, set as it answers, come on top.
 */
function keepReplyHeaders(reply: FastifyReply) {
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
}

/** The session's transport a request goes to, or a new session's for an `initialize`; null once refused. */
async function transportFor(
  request: FastifyRequest,
  reply: FastifyReply,
  { services, sessions, keyId }: { services: Services; sessions: McpSessions; keyId: string },
): Promise<{ transport: StreamableHTTPServerTransport; session?: McpSession } | null> {
  const named = request.headers['mcp-session-id'];
  if (typeof named === 'string') {
    const session = sessions.get(named, keyId);
    if (!session) refuse(reply, 404, 'Session not found');
    return session ? { transport: session.transport, session } : null;
  }
  if (request.method !== 'POST' || !isInitializeRequest(request.body)) {
    refuse(reply, 400, 'No session: send an initialize request first, then its Mcp-Session-Id with every request');
    return null;
  }
  if (!sessions.hasRoomFor(keyId)) {
    refuse(reply, 429, 'Too many MCP sessions for this API key: end one (DELETE /mcp) first');
    return null;
  }
  const server = new McpServer(SERVER_INFO, { capabilities: { tools: {} } });
  registerTools(server, services, request.viewer);
  const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
    sessionIdGenerator: randomUUID,
    onsessioninitialized: (id) => sessions.add({ id, keyId, server, transport }),
    onsessionclosed: (id) => sessions.closed(id),
  });
  await server.connect(transport);
  return { transport };
}
