import type { WorkConfig } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import { Prisma } from '../../generated/prisma/client.ts';
import type { EventBus } from '../core/bus.ts';
import { debit } from '../core/ledger.ts';
import { isDatabaseUnavailable } from '../core/stores/prisma-errors.ts';
import type { Metrics } from '../../observability/metrics.ts';
import type { MediaStore } from '../media/store.ts';
import type { ChatTool } from '../core/chat.ts';
import type { RequestedToolCall, ToolHost, ToolRunContext } from '../core/tool-host.ts';
import { BUDGET_EXCEEDED } from '../core/budgets.ts';
import type { SessionEventPayload } from '../core/events.ts';
import { toToolCallView } from '../core/stores/message-rows.ts';
import type { SearchService } from '../search/service.ts';
import { checkArguments, parametersJsonSchema } from './arguments.ts';
import { costOf } from './cost-of.ts';
import { claimToolCall, returnHold } from '../core/holds.ts';
import type { ToolDefinition } from './definition.ts';
import { httpExecutor } from './executors/http.ts';
import { imageExecutor } from './executors/image.ts';
import { searchExecutor } from './executors/search.ts';
import { textExecutor } from './executors/text.ts';
import { ToolError, type Executor, type ToolOutput } from './executors/types.ts';
import type { ToolRegistry } from './registry.ts';
import { toolRunQueue } from './run-queue.ts';

export interface ToolHostDeps {
  db: Db;
  registry: ToolRegistry;
  bus: EventBus;
  search: SearchService;
  media: MediaStore;
  log: { error(obj: unknown, msg?: string): void };
  metrics: Metrics['manna'];
  work: Pick<WorkConfig, 'toolCallsPerModelCall' | 'toolCallsPerReply' | 'toolRunsPerUser' | 'toolRunsPerProcess' | 'imageWorkers'>;
}

/** A call that must not run (budget, balance), with the reason the model is told. */
class Refused extends Error {}

type Row = Prisma.ToolCallGetPayload<object>;

/**
 * Tools at work in replies. The model is offered the agent's enabled tools that can run here
 * (hidden helpers included, only when enabled like any other). Each call it asks for is saved
 * (pending), checked, charged before it runs (running: a hold on the paying user's manna and the
 * session's manna budget, in one transaction with its ledger rows), run, and settled: completed
 * with its result and the creations it made, or failed or cancelled with its hold refunded.
 * Calls of one model call run in parallel; a bad call is an error result, never a crash.
 */
export function createToolHost(deps: ToolHostDeps): ToolHost {
  const { db, registry, bus, log, work } = deps;
  const queue = toolRunQueue({ perUser: work.toolRunsPerUser, total: work.toolRunsPerProcess });
  const executors = new Map<string, Executor>();
  for (const tool of registry.all()) {
    const handler = tool.handler;
    if (!handler) continue;
    if (typeof handler === 'object') executors.set(tool.key, httpExecutor(handler.http, handler.timeout_ms, handler.retries));
    else
      executors.set(
        tool.key,
        { image: imageExecutor(deps.media, work.imageWorkers), text: textExecutor, search: searchExecutor(deps.search) }[handler],
      );
  }

  const usable = (tool: ToolDefinition | undefined, enabled: Record<string, boolean>): tool is ToolDefinition =>
    Boolean(
      tool &&
        tool.active &&
        executors.has(tool.key) &&
        // Hidden helpers too: they can charge the agent's owner, so only its owner turns them on.
        Object.hasOwn(enabled, tool.key) &&
        enabled[tool.key] === true,
    );

  const emit = (sessionId: string, event: SessionEventPayload) =>
    bus.publish(sessionId, event).catch((err) => log.error({ err }, 'could not publish a tool event'));

  /** Settles a call and tells the session; false when it had been settled already. */
  async function finish(
    row: Row,
    ctx: ToolRunContext,
    outcome: { status: 'completed' | 'failed' | 'cancelled'; result?: unknown; error?: string },
    held: boolean,
    alongside?: (tx: Prisma.TransactionClient) => Promise<unknown>,
  ) {
    const saved = await db.$transaction(async (tx) => {
      const data = {
        status: outcome.status,
        result: (outcome.result ?? Prisma.JsonNull) as Prisma.InputJsonValue,
        error: outcome.error ?? null,
      };
      const refunding = held && outcome.status !== 'completed';
      // The session's row before the call's, in the order a session delete takes them, so the two never deadlock.
      if (refunding) await tx.$queryRaw`SELECT 1 FROM "Session" WHERE "id" = ${ctx.sessionId} FOR UPDATE`;
      // Someone else settled it: its session was deleted while it ran, and the hold given back then.
      if (!(await claimToolCall(tx, row.id, held ? 'running' : 'pending', data))) return null;
      if (refunding)
        await returnHold(tx, row.id, {
          reason: `refund: ${row.tool} ${outcome.status}`,
          sessionId: ctx.sessionId,
          messageId: ctx.messageId,
        });
      await alongside?.(tx);
      return tx.toolCall.findUniqueOrThrow({ where: { id: row.id } });
    });
    if (!saved) return false;
    if (held && outcome.status === 'completed' && saved.cost) deps.metrics.charged(saved.tool, saved.cost.toNumber());
    const base = { promptId: ctx.promptId, messageId: ctx.messageId, agentId: ctx.agentId, toolCall: toToolCallView(saved) };
    void emit(ctx.sessionId, outcome.status === 'cancelled' ? { type: 'tool_cancelled', ...base } : { type: 'tool_complete', ...base });
    return true;
  }

  /** Holds the call's cost: within the session's manna budget, and from the payer's balance. */
  async function hold(row: Row, cost: Prisma.Decimal, payer: string, ctx: ToolRunContext) {
    await db.$transaction(async (tx) => {
      if (cost.isPositive() && !cost.isZero()) {
        const within = await tx.$executeRaw`
          UPDATE "Session" SET "mannaSpent" = "mannaSpent" + ${cost.toString()}::decimal
          WHERE "id" = ${ctx.sessionId} AND ("mannaBudget" IS NULL OR "mannaSpent" + ${cost.toString()}::decimal <= "mannaBudget")`;
        if (!within) throw new Refused(BUDGET_EXCEEDED.manna);
        const taken = await debit(tx, payer, cost, {
          reason: `tool: ${row.tool}`,
          sessionId: ctx.sessionId,
          messageId: ctx.messageId,
          toolCallId: row.id,
        });
        if (!taken) {
          const { subscriptionBalance, foreverBalance } = await tx.user.findUniqueOrThrow({
            where: { id: payer },
            select: { subscriptionBalance: true, foreverBalance: true },
          });
          throw new Refused(`Not enough manna: this call costs ${cost}, the balance is ${subscriptionBalance.plus(foreverBalance)}`);
        }
      }
      // A call whose session was deleted meanwhile is gone: roll the charge back.
      if (!(await claimToolCall(tx, row.id, 'pending', { status: 'running', cost }))) throw new Refused('The session was deleted');
    });
  }

  /**
   * The media a tool produced, as creations of the user, saved with the call's settlement: a call
   * cancelled meanwhile (its session deleted) leaves none.
   */
  const creationsOf =
    (output: ToolOutput, tool: ToolDefinition, args: Record<string, unknown>, ctx: ToolRunContext) => (tx: Prisma.TransactionClient) =>
      tx.creation.createMany({
        data: (output.media ?? []).map((m) => ({
          id: m.id,
          userId: ctx.userId,
          agentId: ctx.agentId,
          tool: tool.key,
          args: args as Prisma.InputJsonValue,
          name: m.name,
          url: m.url,
          thumbnail: m.thumbnail,
          filename: m.filename,
          mediaAttributes: m.mediaAttributes as Prisma.InputJsonValue,
        })),
      });

  async function runOne(
    row: Row,
    call: RequestedToolCall,
    ctx: ToolRunContext,
    enabled: Record<string, boolean>,
    payer: string,
  ): Promise<unknown> {
    const tool = registry.get(call.name);
    if (!usable(tool, enabled)) {
      const error = `There is no tool named "${call.name}" for this agent`;
      await finish(row, ctx, { status: 'failed', error }, false);
      return { error };
    }
    const checked = checkArguments(tool, call.arguments);
    if ('error' in checked) {
      await finish(row, ctx, { status: 'failed', error: checked.error }, false);
      return { error: checked.error };
    }
    const cost = costOf(tool, checked.args);
    // The turn is taken before the charge: a call waiting for one costs nothing until it runs.
    let release: () => void;
    try {
      release = await queue.turn(ctx.userId, ctx.signal);
    } catch {
      await finish(row, ctx, { status: 'cancelled', error: 'The reply was stopped before the tool ran' }, false);
      return { error: 'cancelled' };
    }
    try {
      return await runHeld(row, tool, checked.args, cost, ctx, payer);
    } finally {
      release();
    }
  }

  async function runHeld(
    row: Row,
    tool: ToolDefinition,
    args: Record<string, unknown>,
    cost: Prisma.Decimal,
    ctx: ToolRunContext,
    payer: string,
  ) {
    try {
      await hold(row, cost, payer, ctx);
    } catch (e) {
      if (!(e instanceof Refused)) throw e;
      await finish(row, ctx, { status: 'failed', error: e.message }, false);
      return { error: e.message };
    }
    try {
      const output = await executors.get(tool.key)!({
        tool,
        args: args,
        userId: ctx.userId,
        agentId: ctx.agentId,
        sessionId: ctx.sessionId,
        signal: ctx.signal,
      });
      const settled = await finish(
        row,
        ctx,
        { status: 'completed', result: output.result },
        true,
        output.media?.length ? creationsOf(output, tool, args, ctx) : undefined,
      );
      // Settled elsewhere meanwhile (its session deleted, or its reply taken for dead and its hold
      // refunded): the result was not charged for, so the model does not get it either.
      if (!settled) return { error: 'The tool call was stopped before its result was saved' };
      // Searchable like any other creation; embedding is outside the transaction (a remote call).
      if (output.media?.length) await deps.search.indexCreations(output.media.map((m) => m.id));
      return output.result;
    } catch (e) {
      if (ctx.signal.aborted) {
        await finish(row, ctx, { status: 'cancelled', error: 'The reply was stopped before the tool finished' }, true);
        return { error: 'cancelled' };
      }
      // Settling a call that ran needs the database; losing it is not the tool's failure.
      if (!(e instanceof ToolError || isDatabaseUnavailable(e))) log.error({ err: e, tool: tool.key }, 'a tool failed');
      const error = e instanceof ToolError ? e.message : 'The tool failed';
      await finish(row, ctx, { status: 'failed', error }, true);
      return { error };
    }
  }

  return {
    offer(_agentId, enabled): ChatTool[] {
      return registry
        .all()
        .filter((t) => usable(t, enabled))
        .map((t) => ({ type: 'function', function: { name: t.key, description: t.description, parameters: parametersJsonSchema(t) } }));
    },

    async record(calls, ctx) {
      const [agent, session] = await Promise.all([
        db.agent.findUniqueOrThrow({ where: { id: ctx.agentId }, select: { tools: true, ownerPays: true, ownerId: true } }),
        db.session.findUniqueOrThrow({ where: { id: ctx.sessionId }, select: { ownerId: true } }),
      ]);
      // The session's owner pays, unless the agent's owner pays for everything it does.
      const payer = agent.ownerPays === 'full' ? agent.ownerId : session.ownerId;
      const enabled = agent.tools as Record<string, boolean>;
      const rows = await db.$transaction(async (tx) => {
        const start = await tx.toolCall.count({ where: { messageId: ctx.messageId } });
        return tx.toolCall.createManyAndReturn({
          data: calls.map((c, i) => ({
            messageId: ctx.messageId,
            position: start + i,
            callId: c.id,
            tool: c.name,
            args: argumentsForRecord(c.arguments),
          })),
        });
      });
      rows.sort((a, b) => a.position - b.position);
      return {
        async run() {
          // Past the caps, a call is saved as failed (nothing charged) and the model told why.
          const results = await Promise.all(
            rows.map((row, i) => {
              const over =
                i >= work.toolCallsPerModelCall
                  ? `Too many tool calls at once: at most ${work.toolCallsPerModelCall} run per model call`
                  : row.position >= work.toolCallsPerReply
                    ? `Too many tool calls: at most ${work.toolCallsPerReply} run per reply`
                    : null;
              if (over) return finish(row, ctx, { status: 'failed', error: over }, false).then(() => ({ error: over }));
              return runOne(row, calls[i]!, ctx, enabled, payer);
            }),
          );
          return calls.map((c, i) => ({ id: c.id, content: JSON.stringify(results[i] ?? null) }));
        },
      };
    },
  };
}

/** The arguments as the model sent them, kept even when they are not valid JSON. */
function argumentsForRecord(raw: string): Prisma.InputJsonValue {
  try {
    const parsed = JSON.parse(raw) as unknown;
    return parsed !== null && typeof parsed === 'object' ? (parsed as Prisma.InputJsonValue) : { raw };
  } catch {
    return { raw };
  }
}
