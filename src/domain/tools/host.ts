import type { WorkConfig } from '../../config.ts';
import type { Metrics } from '../../observability/metrics.ts';
import type { EventBus } from '../core/bus.ts';
import type { ChatTool } from '../core/chat.ts';
import type { SessionEventPayload } from '../core/events.ts';
import type { MediaLinks } from '../core/media-links.ts';
import type { Manna } from '../core/manna.ts';
import type { AwaitingCall, RequestedToolCall, ToolHost, ToolResult, ToolRunContext } from '../core/tool-host.ts';
import type { MediaStore } from '../media/store.ts';
import type { SearchService } from '../search/service.ts';
import { type ToolApproval, needsApproval, toolApprovalOf } from './approval.ts';
import { checkArguments, parametersJsonSchema } from './arguments.ts';
import { costOf } from './cost-of.ts';
import type { ToolDefinition } from './definition.ts';
import { countdownExecutor } from './executors/countdown.ts';
import { imageExecutor } from './executors/image.ts';
import { searchExecutor } from './executors/search.ts';
import { textExecutor } from './executors/text.ts';
import type { Executor, ToolServiceClient } from './executors/types.ts';
import type { McpToolSource, OfferedTool, RunnableTool, ToolStore } from './ports.ts';
import type { ToolRegistry } from './registry.ts';
import { callRunner } from './run-call.ts';
import type { ToolRunQueue } from './run-queue.ts';

export interface ToolHostDeps {
  /** Where calls are saved and charged (`store.ts` on the database). */
  store: ToolStore;
  registry: ToolRegistry;
  /** Who runs each tool that can run here, by key (`toolExecutors`). */
  executors: ReadonlyMap<string, Executor>;
  /** The media tools make become searchable creations. */
  search: Pick<SearchService, 'indexCreations'>;
  bus: EventBus;
  log: { error(obj: unknown, msg?: string): void };
  metrics: Metrics['manna'];
  work: Pick<WorkConfig, 'toolCallsPerModelCall' | 'toolCallsPerReply'>;
  /** Turns for running tools, shared with tasks made by themselves (one per-user and per-process limit for both). */
  queue: ToolRunQueue;
  /** Results keep the links they are stored with; the model is given them absolute, to show them. */
  links: MediaLinks;
  /** Tools of the MCP servers agents' owners enabled on them (none without). */
  mcp?: McpToolSource;
}

/** A registry tool as a reply's call runs it: checked against its parameters, priced by its estimate, run by its executor. */
const registryTool = (tool: ToolDefinition, executor: Executor): RunnableTool => ({
  key: tool.key,
  check: (raw) => checkArguments(tool, raw),
  cost: (args) => costOf(tool, args),
  execute: ({ progress, ...run }) => executor({ tool, ...run, progress: (fraction, detail) => progress(fraction, detail) }),
});

const noMcpTools: McpToolSource = { forAgent: async () => new Map() };

/**
 * Who runs each tool of the registry that has a handler: an executor built in, or a service
 * elsewhere, called through `remote` (the client the composition root picked).
 */
export function toolExecutors(
  registry: ToolRegistry,
  parts: { search: SearchService; media: MediaStore; imageWorkers: WorkConfig['imageWorkers']; remote: ToolServiceClient },
): Map<string, Executor> {
  const executors = new Map<string, Executor>();
  for (const tool of registry.all()) {
    const handler = tool.handler;
    if (!handler) continue;
    if (typeof handler === 'object')
      executors.set(tool.key, parts.remote({ url: handler.http, timeoutMs: handler.timeout_ms, retries: handler.retries }));
    else
      executors.set(
        tool.key,
        {
          image: imageExecutor(parts.media, parts.imageWorkers),
          text: textExecutor,
          search: searchExecutor(parts.search),
          countdown: countdownExecutor,
        }[handler],
      );
  }
  return executors;
}

/** Past the caps, a call is saved as failed (nothing charged) and the model told why; null when it may run. */
function overCap(index: number, position: number, work: ToolHostDeps['work']) {
  if (index >= work.toolCallsPerModelCall) return `Too many tool calls at once: at most ${work.toolCallsPerModelCall} run per model call`;
  if (position >= work.toolCallsPerReply) return `Too many tool calls: at most ${work.toolCallsPerReply} run per reply`;
  return null;
}

/** Whether a call must wait for approval: a usable tool, good arguments, and the agent's rule says so. */
function approvalPrice(tool: RunnableTool | undefined, call: RequestedToolCall, setting: ToolApproval): Manna | null {
  if (!tool) return null;
  const checked = tool.check(call.arguments);
  if ('error' in checked) return null;
  const cost = tool.cost(checked.args);
  return needsApproval(setting, tool.key, cost) ? cost : null;
}

/**
 * Tools at work in replies. The model is offered the agent's enabled tools that can run here
 * (hidden helpers included, only when enabled like any other). Each call it asks for is saved
 * (pending), checked, charged before it runs (running: a hold on the paying user's manna and the
 * session's manna budget, in one transaction with its ledger rows), run, and settled: completed
 * with its result and the creations it made, or failed or cancelled with its hold refunded
 * (`run-call.ts`). Calls of one model call run in parallel; a bad call is an error result, never
 * a crash. A call the agent's owner wants to approve first (`approval.ts`) is not run: it is saved
 * `awaiting_approval` at its price, holding nothing, and the reply pauses; once answered, `resume`
 * runs it (approved) or tells the model why not.
 */
export function createToolHost(deps: ToolHostDeps): ToolHost {
  const { store, registry, bus, log, work, executors, queue } = deps;
  const emit = (sessionId: string, event: SessionEventPayload) =>
    bus.publish(sessionId, event).catch((err) => log.error({ err }, 'could not publish a tool event'));
  const calls = callRunner({ store, queue, search: deps.search, emit, log, metrics: deps.metrics });
  const mcp = deps.mcp ?? noMcpTools;

  const usable = (tool: ToolDefinition | undefined, enabled: Record<string, boolean>): tool is ToolDefinition =>
    Boolean(
      tool &&
        tool.active &&
        executors.has(tool.key) &&
        // Hidden helpers too: they can charge the agent's owner, so only its owner turns them on.
        Object.hasOwn(enabled, tool.key) &&
        enabled[tool.key] === true,
    );
  const toModel = (id: string, result: unknown): ToolResult => ({ id, content: JSON.stringify(deps.links.absoluteIn(result ?? null)) });

  async function payerOf(ctx: ToolRunContext) {
    const payers = await store.payers(ctx.agentId, ctx.sessionId);
    return {
      // The session's owner pays, unless the agent's owner pays for everything it does.
      payer: payers.ownerPays === 'full' ? payers.agentOwnerId : payers.sessionOwnerId,
      enabled: payers.tools as Record<string, boolean>,
      approval: toolApprovalOf(payers.toolApproval),
      withMcp: Boolean(payers.mcpTools),
    };
  }

  /**
   * Every tool the agent may call now, by the name the model calls it: its enabled registry tools,
   * then its MCP tools whose names no registry tool of it takes.
   */
  async function offered(agentId: string, enabled: Record<string, boolean>, withMcp: boolean) {
    const all = new Map<string, OfferedTool>();
    for (const t of registry.all())
      if (usable(t, enabled))
        all.set(t.key, {
          chat: { type: 'function', function: { name: t.key, description: t.description, parameters: parametersJsonSchema(t) } },
          tool: registryTool(t, executors.get(t.key)!),
        });
    if (withMcp) for (const [name, tool] of await mcp.forAgent(agentId)) if (!all.has(name)) all.set(name, tool);
    return all;
  }

  return {
    async offer(agentId, enabled, withMcp): Promise<ChatTool[]> {
      return [...(await offered(agentId, enabled, withMcp)).values()].map((t) => t.chat);
    },

    async record(requested, ctx) {
      const { payer, enabled, approval, withMcp } = await payerOf(ctx);
      const tools = await offered(ctx.agentId, enabled, withMcp);
      const rows = await store.record({ messageId: ctx.messageId, sessionId: ctx.sessionId, agentId: ctx.agentId, payer }, requested);
      return {
        async run() {
          const awaiting: AwaitingCall[] = [];
          const results = await Promise.all(
            rows.map(async (row, i) => {
              const over = overCap(i, row.position, work);
              if (over) return toModel(requested[i]!.id, await calls.refuse(row, ctx, over));
              const call = requested[i]!;
              const tool = tools.get(call.name)?.tool;
              const price = approvalPrice(tool, call, approval);
              if (price !== null) {
                // Not run now: it has no result until it is answered (null when the call is gone meanwhile).
                const toolCall = await store.awaitApproval(row, price);
                if (toolCall) {
                  awaiting.push({ call, position: row.position, toolCall, payer, timeoutSeconds: approval.timeoutSeconds });
                  return undefined;
                }
              }
              return toModel(call.id, await calls.run(row, call, tool, ctx, payer));
            }),
          );
          awaiting.sort((a, b) => a.position - b.position);
          return { results: results.filter((r): r is ToolResult => r !== undefined), awaiting };
        },
      };
    },

    async resume(paused, ctx) {
      const { payer, enabled, withMcp } = await payerOf(ctx);
      const outcomes = new Map((await store.approvalOutcomes(paused.map((p) => p.taskId))).map((o) => [o.id, o]));
      const approved = paused.some((p) => outcomes.get(p.taskId)?.status === 'pending');
      const tools = approved ? await offered(ctx.agentId, enabled, withMcp) : new Map<string, OfferedTool>();
      return Promise.all(
        paused.map(async ({ call, taskId, position }) => {
          const outcome = outcomes.get(taskId);
          // Approved: it runs as any call does, charged as it starts; the owner may have turned the tool off meanwhile.
          if (outcome?.status === 'pending')
            return toModel(
              call.id,
              await calls.run({ id: taskId, position, tool: call.name }, call, tools.get(call.name)?.tool, ctx, payer),
            );
          return toModel(call.id, { error: outcome?.error ?? 'The tool call was not approved' });
        }),
      );
    },
  };
}
