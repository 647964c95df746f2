import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { isDomainError } from '../domain/core/errors.ts';
import { feedFamilies } from '../domain/core/feed-events.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import type { Services } from '../domain/services.ts';
import { type Progress, talk } from './talk.ts';

/** The most agents or creations one call lists: a page, as REST's and GraphQL's lists give. */
const MAX_PAGE = 50;

const json = (value: unknown): CallToolResult => ({
  content: [{ type: 'text', text: JSON.stringify(value) }],
  structuredContent: value as Record<string, unknown>,
});

/** A refusal the caller can act on (not found, bad input, not enough manna) is the tool's failure, told to the model. */
const failure = (message: string): CallToolResult => ({ content: [{ type: 'text', text: message }], isError: true });

/** A field of the domain's input as the tools' arguments name it (`agentIds` is `agent_id`). */
const argumentName = (field: string | number) =>
  field === 'agentIds' ? 'agent_id' : String(field).replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * Runs a tool's body; the domain's refusals become the tool's failure with the same message REST
 * and GraphQL give (naming the argument at fault, as REST names its field), and anything else
 * (the database down) a protocol error, as a 500 would be.
 */
async function answering(run: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await run();
  } catch (e) {
    if (!isDomainError(e)) throw e;
    const field = e.fieldPath?.[0];
    return failure(field === undefined ? e.message : `${argumentName(field)}: ${e.message}`);
  }
}

const page = { first: z.number().int().min(1).max(MAX_PAGE).optional(), after: z.string().max(100).optional() };

/**
 * The user's world as MCP tools: each is the same domain call REST's and GraphQL's operations
 * make, with the same viewer (its key), so the same rules, limits and ledger apply.
 */
export function registerTools(server: McpServer, services: Services, viewer: Viewer) {
  server.registerTool(
    'list_agents',
    {
      title: 'List agents',
      description: 'Agents you may talk to (your own and public ones), newest first; `after` is the last id of the page before.',
      inputSchema: { text: z.string().max(200).optional(), ...page },
      annotations: { readOnlyHint: true },
    },
    ({ text, first = 20, after }) =>
      answering(async () => {
        const rows = await services.agents.list(
          viewer,
          { text },
          { take: first + 1, ...(after ? { cursor: { id: after }, skip: 1 } : {}) },
        );
        const agents = rows.slice(0, first).map((a) => ({
          id: a.id,
          name: a.name,
          description: a.description,
          public: a.public,
          yours: a.ownerId === viewer.id,
        }));
        return json({ agents, hasMore: rows.length > first });
      }),
  );

  server.registerTool(
    'talk_to_agent',
    {
      title: 'Talk to an agent',
      description:
        'Send a message to an agent, in a new session or in `session_id`; the reply streams as progress notifications and its text is the result.',
      inputSchema: {
        agent_id: z.string().min(1).max(100).optional(),
        session_id: z.string().min(1).max(100).optional(),
        content: z.string().min(1).max(100_000),
      },
    },
    ({ agent_id, session_id, content }, extra) =>
      answering(() =>
        talk(
          services,
          viewer,
          { agentIds: agent_id ? [agent_id] : undefined, sessionId: session_id, content },
          progressOf(extra),
          extra.signal,
        ),
      ),
  );

  server.registerTool(
    'search_creations',
    {
      title: 'Search creations',
      description: 'Creations you may see, ranked by meaning.',
      inputSchema: { query: z.string().min(1).max(1000), agent_id: z.string().max(100).optional(), limit: page.first },
      annotations: { readOnlyHint: true },
    },
    ({ query, agent_id, limit }) =>
      answering(async () => {
        const found = await services.search.search(viewer, { query, agentId: agent_id, limit: limit ?? 20 });
        const creations = found.docs.map((c) => ({
          id: c.id,
          name: c.name,
          tool: c.tool,
          url: services.links.absolute(c.url),
          agentId: c.agentId,
          score: c.score,
        }));
        return json({ creations, total: found.total });
      }),
  );

  const taskInput = { tool: z.string().min(1).max(100), args: z.record(z.string(), z.unknown()).optional() };
  server.registerTool(
    'estimate_task',
    {
      title: 'Estimate a task',
      description: 'What running this tool with these arguments would cost, in manna.',
      inputSchema: taskInput,
      annotations: { readOnlyHint: true },
    },
    ({ tool, args }) => answering(async () => json(services.tasks.estimate(viewer, { tool, args: args ?? {} }))),
  );

  server.registerTool(
    'run_task',
    {
      title: 'Run a task',
      description:
        'Run a tool by itself: its cost is held at once, charged if it completes, returned otherwise. Progress comes as notifications; the result is the task’s.',
      inputSchema: taskInput,
    },
    ({ tool, args }, extra) => answering(() => runTask(services, viewer, { tool, args: args ?? {} }, progressOf(extra), extra.signal)),
  );
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** Reports progress to the caller when it asked for it (a progress token), else nowhere. */
function progressOf(extra: Extra): Progress {
  const token = extra._meta?.progressToken;
  // The protocol wants each notification's progress above the last: a count of them is.
  let count = 0;
  return (message) => {
    if (token === undefined) return;
    count += 1;
    void extra
      .sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: count, message } })
      .catch(() => {});
  };
}

/**
 * Creates the task as `POST /v2/tasks/create` does and follows it on the caller's feed, as
 * `GET /v2/tasks/events?taskId=` does, until it ends. The watch opens first, so an end that
 * comes before the task's id is known is not missed.
 */
async function runTask(
  services: Services,
  viewer: Viewer,
  input: { tool: string; args: Record<string, unknown> },
  progress: Progress,
  signal: AbortSignal,
): Promise<CallToolResult> {
  const events = await services.feeds.watch(viewer, { types: feedFamilies.task });
  const stop = () => events.close();
  signal.addEventListener('abort', stop, { once: true });
  try {
    const task = await services.tasks.create(viewer, input);
    for await (const event of events) {
      if ('end' in event) return failure(`The task ${task.id} is still running, but its watch ended: ${event.reason}`);
      if (event.taskId !== task.id) continue;
      if (event.type === 'task_progress') progress(event.message ?? `${Math.round(event.progress * 100)}%`);
      if (event.type === 'task_completed')
        return json({ taskId: task.id, status: 'completed', result: services.links.absoluteIn(event.result), cost: event.cost });
      if (event.type === 'task_failed') return failure(`The task ${task.id} failed: ${event.error}`);
      if (event.type === 'task_cancelled') return failure(`The task ${task.id} was cancelled`);
    }
    return failure(`The task ${task.id} is still running, but its watch ended`);
  } finally {
    signal.removeEventListener('abort', stop);
    events.close();
  }
}
