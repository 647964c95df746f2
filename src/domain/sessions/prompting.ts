import { canReadAgent } from '../agents/service.ts';
import { BUDGET_EXCEEDED } from '../core/budgets.ts';
import type { EventBus } from '../core/bus.ts';
import { coalesced } from '../core/coalesce.ts';
import { badInput, conflict, forbidden, unauthenticated } from '../core/errors.ts';
import type { MessageView } from '../core/events.ts';
import { canNameARow } from '../core/ids.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import type { ReplyEngine, ReplyJob } from '../replies/engine.ts';
import { chooseResponders } from '../replies/routing.ts';
import { canPost, NO_ACCESS, type SessionAccess } from '../access/service.ts';
import { KEY_DELETED_END } from '../core/watch.ts';
import { type AutonomySettings, type SendMessageInput, sendMessageSchema } from './inputs.ts';
import { allowChange, announceChange } from './settings.ts';
import { type AgentAsk, BudgetStop, KeyGone, type NewSessionAgent, RepliesUnderWay, type SavedPrompt, type SessionStore } from './store.ts';

export const AGENT_IDS_REQUIRED = 'agent_ids must be provided when creating a new session';
export const AGENT_NO_LONGER_USABLE = 'This agent is no longer usable by you (its owner made it private)';
/** A prompt that said `reject` while replies were being written: the 409 names them. */
export const repliesUnderWayText = (replyIds: string[]) =>
  `An agent is still replying in this session (reply ${replyIds.join(', ')}); send again when it has finished, or with while_replying enqueue, interrupt or rollback`;
export const NO_USABLE_AGENT = "This session's agents are no longer usable by you (their owners made them private or deleted them)";

/** The result of operation 4: the session, and the prompt whose replies are now being written. */
export interface PromptStarted {
  sessionId: string;
  created: boolean;
  /** Null when the request carried no message (a session created empty). */
  promptId: string | null;
  message: MessageView | null;
  replies: ReplyJob['replies'];
  /** Seq of the prompt's `start_prompt` event: watch from just before it to see the whole reply. */
  startSeq: number | null;
}

/** An agent that will be in the prompt's session; for a new session, as the replies will need it. */
interface PromptAgent {
  id: string;
  name: string;
  key: string;
  read?: NewSessionAgent;
}

/** Each of a statement's users may bring MEMORY_CAP facts per agent: fewer reads per statement than for keys. */
const AGENT_READS_PER_STATEMENT = 100;

/**
 * A prompt the session's owner relays for someone else: a deployment passes on what a person
 * wrote on a platform. Access is the owner's (who may post, which agents answer); the message is
 * the person's (its sender, what the agent remembers of them). `promptId` is chosen by the
 * relay, so a prompt relayed twice (after a crash) is saved once: the second save fails.
 */
export interface Relay {
  sender: string;
  promptId: string;
}

/**
 * What a change of a session's settings asks of its autonomous turns: `autonomy/` answers, which
 * sits above sessions (its turns are replies in them) and is handed in by the composition.
 */
export interface SessionAutonomy {
  /**
   * Whether a change of `sessionId` (none: a new session) may set these settings with these
   * budgets (it throws when it may not); whether auto-reply was on before the change.
   */
  check(sessionId: string | undefined, settings: AutonomySettings | undefined, setsBudget: boolean): Promise<boolean>;
  /** After the change is saved: starts the loop, or stops it (`wasOn`: before the change). */
  changed(sessionId: string, settings: AutonomySettings, wasOn: boolean): Promise<void>;
  /** Stops the loop; whether it was running. */
  turnOff(sessionId: string): Promise<boolean>;
}

export interface PromptDependencies {
  store: SessionStore;
  bus: EventBus;
  replies: Pick<ReplyEngine, 'instanceId' | 'start'>;
  access: SessionAccess;
  autonomy: SessionAutonomy;
}

/** Prompts and their replies: sending one (operation 4), and stopping the replies being written. */
export function promptRules({ store, bus, replies, access, autonomy }: PromptDependencies) {
  /**
   * The agents a new session's prompt names, with what each remembers of the user when the
   * prompt will be answered: the reads of prompts that arrive together go in one statement.
   */
  const agentReads = coalesced((asks: readonly AgentAsk[]) => store.agentsForNewSessions(asks), AGENT_READS_PER_STATEMENT);

  /** The session's agents in order, as the prompt needs them; for a new session, checked first. */
  async function agentsFor(viewer: Viewer, input: SendMessageInput): Promise<PromptAgent[]> {
    if (input.sessionId) {
      const agents = await store.sessionAgents(input.sessionId);
      input.agentIds?.forEach((id, i) => {
        const agent = agents.find((a) => a.id === id);
        if (!agent) throw badInput('agent is not in this session', ['agentIds', i]);
        if (!canReadAgent(viewer, agent)) throw forbidden(AGENT_NO_LONGER_USABLE);
      });
      // Checked on every prompt, not only when the session was made: an agent its owner made
      // private since must not answer (or charge its owner for) someone who may no longer use it.
      return agents.filter((a) => canReadAgent(viewer, a)).map(({ id, name, key }) => ({ id, name, key }));
    }
    if (!input.agentIds?.length) throw badInput(AGENT_IDS_REQUIRED);
    const recall = !input.extras?.excludeMemory && Boolean(input.content?.trim() || input.attachments?.length);
    const found = await agentReads.loadMany(input.agentIds.map((agentId) => ({ agentId, userId: viewer.id, recall })));
    return found.map((read, i) => {
      if (read instanceof Error) throw read;
      if (!read || !canReadAgent(viewer, read.agent)) throw badInput('agent not found or not usable by you', ['agentIds', i]);
      return { id: read.agent.id, name: read.agent.name, key: read.agent.user.username, read };
    });
  }

  /**
   * Operation 4. Saves the prompt and starts the agents' replies in the background. The turn
   * budget is spent for every agent that will answer in the same transaction that saves the
   * prompt, so concurrent prompts can never run more model calls than the budget allows; a
   * prompt past a budget saves nothing.
   */
  async function send(viewer: Viewer, raw: unknown, options: { confirmKey?: boolean; relay?: Relay } = {}): Promise<PromptStarted> {
    const input = parseInput(sendMessageSchema, raw);
    if (options.relay && !input.sessionId) throw new Error('a relayed prompt goes to a session that exists');
    // A prompt's `whileReplying` is its own; on a request that creates the session it is the session's default too.
    const change = await allowChange({ access, autonomy }, viewer, input.sessionId, {
      ...input,
      whileReplying: input.sessionId ? undefined : input.whileReplying,
    });
    const { settings } = change;
    const agents = await agentsFor(viewer, input);
    const content = input.content ?? '';
    const attachments = input.attachments ?? [];
    const hasPrompt = content.trim() !== '' || attachments.length > 0;
    if (hasPrompt && !agents.length) throw forbidden(NO_USABLE_AGENT);
    const responders = hasPrompt ? chooseResponders(agents, input.agentIds, content) : [];
    // A new session has spent nothing: only its turn budget can be too small for the agents.
    if (!input.sessionId && settings.turnBudget !== undefined && responders.length > settings.turnBudget)
      throw badInput(BUDGET_EXCEEDED.turns);

    const toSave = {
      userId: options.relay?.sender ?? viewer.id,
      promptId: options.relay?.promptId,
      prompt: hasPrompt ? { content, attachments, responders } : null,
      instance: replies.instanceId,
      keyId: options.confirmKey ? viewer.keyId : null,
    };
    let saved: SavedPrompt;
    let known: ReplyJob['known'];
    try {
      if (input.sessionId) {
        saved = await store.addPrompt({
          ...toSave,
          session: { id: input.sessionId, update: change.changes ? settings : undefined },
          whileReplying: input.whileReplying,
        });
      } else {
        const created = await store.createSession({ ...toSave, session: { create: { ...settings, agents } } });
        saved = created;
        // A new session's replies need nothing more from the database than what was just written.
        known = {
          scenario: input.scenario ?? null,
          agents: agents.flatMap((a) => (a.read ? [a.read.agent] : [])),
          history: created.history,
          memories: new Map(agents.flatMap((a) => (a.read?.memories ? [[a.id, a.read.memories] as const] : []))),
        };
      }
    } catch (e) {
      if (e instanceof KeyGone) throw unauthenticated(KEY_DELETED_END.reason);
      if (e instanceof BudgetStop) throw badInput(BUDGET_EXCEEDED[e.budget]);
      if (e instanceof RepliesUnderWay) throw conflict(repliesUnderWayText(e.replyIds));
      throw e;
    }
    // Whichever instance writes them stops them now. Their rows say so already: should the bus be
    // out of reach, each ends as asked when it would have completed, and the prompt still stands.
    const reason = saved.stopped?.how === 'rollback' ? 'rolled_back' : 'interrupted';
    for (const promptId of saved.stopped?.promptIds ?? [])
      await bus.cancelReplies({ sessionId: saved.sessionId, promptId, reason }).catch(() => {});

    const { sessionId, prompt: message } = saved;
    // A new session's settings are news to no one yet; its autonomy starts all the same.
    await announceChange({ store, bus, autonomy }, sessionId, { ...change, changes: change.changes && Boolean(input.sessionId) });
    if (!message) return { sessionId, created: !input.sessionId, promptId: null, message: null, replies: [], startSeq: null };
    const started = await bus.publish(sessionId, {
      type: 'start_prompt',
      promptId: message.id,
      message,
      agentIds: responders,
      replyIds: saved.replies.map((r) => r.messageId),
    });
    replies.start({
      sessionId,
      promptId: message.id,
      userId: options.relay?.sender ?? viewer.id,
      replies: saved.replies,
      thinking: input.thinking ?? false,
      excludeMemory: input.extras?.excludeMemory ?? false,
      generateTitle: saved.firstExchange,
      known,
      after: saved.waitFor,
    });
    return { sessionId, created: !input.sessionId, promptId: message.id, message, replies: saved.replies, startSeq: started.seq };
  }

  return {
    send,

    /** Stops the replies being written in a session (to one prompt, or all); anyone who may post may. */
    async cancel(viewer: Viewer, sessionId: string, promptId?: string) {
      if (!canPost(await access.requireAccess(viewer, sessionId))) throw forbidden(NO_ACCESS);
      if (promptId !== undefined && !canNameARow(promptId)) return 0;
      // Counted from the rows, because the replies may be written by another instance.
      const prompts = await store.promptsAnswering(sessionId, promptId);
      // Stopping everything stops the session's autonomous turns too; one prompt's, only its replies.
      if (promptId === undefined) await autonomy.turnOff(sessionId);
      await bus.cancelReplies({ sessionId, promptId, reason: 'cancelled' });
      return prompts;
    },
  };
}
