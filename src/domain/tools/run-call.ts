import type { Metrics } from '../../observability/metrics.ts';
import { BUDGET_EXCEEDED } from '../core/budgets.ts';
import type { SessionEventPayload } from '../core/events.ts';
import type { Manna } from '../core/manna.ts';
import { isDatabaseUnavailable } from '../core/stores/prisma-errors.ts';
import type { RequestedToolCall, ToolRunContext } from '../core/tool-host.ts';
import type { SearchService } from '../search/service.ts';
import { ToolError, type ToolOutput } from './executors/types.ts';
import type { CallCreation, HoldRefused, RecordedCall, RunnableTool, Settlement, ToolStore } from './ports.ts';
import type { ToolRunQueue } from './run-queue.ts';

/** What running a call takes. */
export interface CallRunnerDeps {
  store: ToolStore;
  queue: ToolRunQueue;
  search: Pick<SearchService, 'indexCreations'>;
  emit(sessionId: string, event: SessionEventPayload): Promise<unknown>;
  log: { error(obj: unknown, msg?: string): void };
  metrics: Metrics['manna'];
}

/** What the model is told when a call does not give a result. */
type Refusal = { error: string };

const NOT_ENOUGH_MANNA = 'Not enough manna:';
/** The most progress events one call sends its session's watchers; later reports are not shown. */
export const MOST_PROGRESS_EVENTS = 200;
const DAILY_CAP_REACHED = "The deployment's daily manna cap is reached";

const refusalText = (why: HoldRefused, cost: Manna) =>
  why.refused === 'budget'
    ? BUDGET_EXCEEDED.manna
    : why.refused === 'cap'
      ? DAILY_CAP_REACHED
      : why.refused === 'balance'
        ? `${NOT_ENOUGH_MANNA} this call costs ${cost}, the balance is ${why.balance}`
        : 'The session was deleted';

/** Whether a call's error says it could not be paid for: the payer's balance, the session's manna budget, a deployment's cap. */
export const isPaymentRefusal = (error: string) =>
  error === BUDGET_EXCEEDED.manna || error === DAILY_CAP_REACHED || error.startsWith(NOT_ENOUGH_MANNA);

/** The media a tool produced, as creations of the user. */
const creationsOf = (output: ToolOutput, tool: RunnableTool, args: Record<string, unknown>, ctx: ToolRunContext): CallCreation[] =>
  (output.media ?? []).map((m) => ({
    id: m.id,
    userId: ctx.userId,
    agentId: ctx.agentId,
    tool: tool.key,
    args,
    name: m.name,
    url: m.url,
    thumbnail: m.thumbnail,
    filename: m.filename,
    mediaAttributes: m.mediaAttributes,
  }));

/**
 * The life of one tool call: checked, given a turn, charged (a hold), run and settled; or, at
 * the first step it cannot pass, settled as failed or cancelled, with the model told why.
 */
export function callRunner(deps: CallRunnerDeps) {
  const { store, log } = deps;

  /** Settles a call and tells the session; false when it had been settled already. */
  async function finish(row: RecordedCall, ctx: ToolRunContext, outcome: Settlement, held: boolean, creations: CallCreation[] = []) {
    const saved = await store.settle(row, { sessionId: ctx.sessionId, messageId: ctx.messageId }, outcome, held, creations);
    if (!saved) return false;
    if (held && outcome.status === 'completed' && saved.cost !== null) deps.metrics.charged(saved.tool, saved.cost);
    const base = { promptId: ctx.promptId, messageId: ctx.messageId, agentId: ctx.agentId, toolCall: saved };
    void deps.emit(
      ctx.sessionId,
      outcome.status === 'cancelled' ? { type: 'tool_cancelled', ...base } : { type: 'tool_complete', ...base },
    );
    return true;
  }

  /** A call that must not run: saved as failed, nothing charged. */
  const refuse = (row: RecordedCall, ctx: ToolRunContext, error: string): Promise<Refusal> =>
    finish(row, ctx, { status: 'failed', error }, false).then(() => ({ error }));

  /**
   * The call's progress, live on its session (not saved: a settled call says it is done). At most
   * `MOST_PROGRESS_EVENTS` a call: a tool that reports without end does not flood the watchers.
   */
  const progressOf = (row: RecordedCall, ctx: ToolRunContext) => {
    let told = 0;
    return (fraction: number | null, detail?: string): void => {
      if (++told > MOST_PROGRESS_EVENTS) return;
      void deps.emit(ctx.sessionId, {
        type: 'tool_progress',
        promptId: ctx.promptId,
        messageId: ctx.messageId,
        agentId: ctx.agentId,
        toolCallId: row.id,
        tool: row.tool,
        progress: fraction,
        detail: detail === undefined ? null : detail.slice(0, 500),
      });
    };
  };

  /** Charged, run and settled, with the call's turn held throughout. */
  async function runHeld(
    row: RecordedCall,
    tool: RunnableTool,
    args: Record<string, unknown>,
    cost: Manna,
    ctx: ToolRunContext,
    payer: string,
  ) {
    const refused = await store.hold(row, cost, payer, { sessionId: ctx.sessionId, messageId: ctx.messageId });
    if (refused) return refuse(row, ctx, refusalText(refused, cost));
    try {
      const output = await tool.execute({
        args,
        userId: ctx.userId,
        agentId: ctx.agentId,
        sessionId: ctx.sessionId,
        signal: ctx.signal,
        progress: progressOf(row, ctx),
      });
      const settled = await finish(row, ctx, { status: 'completed', result: output.result }, true, creationsOf(output, tool, args, ctx));
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

  /** Runs a call of a tool the agent may use (`tool`, or undefined when it may not); the result goes to the model. */
  async function run(row: RecordedCall, call: RequestedToolCall, tool: RunnableTool | undefined, ctx: ToolRunContext, payer: string) {
    if (!tool) return refuse(row, ctx, `There is no tool named "${call.name}" for this agent`);
    const checked = tool.check(call.arguments);
    if ('error' in checked) return refuse(row, ctx, checked.error);
    const cost = tool.cost(checked.args);
    // The turn is taken before the charge: a call waiting for one costs nothing until it runs.
    let release: () => void;
    try {
      release = await deps.queue.turn(ctx.userId, ctx.signal);
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

  return { run, refuse };
}
