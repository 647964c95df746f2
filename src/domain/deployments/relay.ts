import { isDomainError } from '../core/errors.ts';
import type { WhileReplying } from '../core/vocabulary.ts';
import { newId } from '../core/ids.ts';
import type { MediaLinks } from '../core/media-links.ts';
import { answerText } from './answer-text.ts';
import { chatRateOf, type LimitDefaults, RATE_WINDOW_MS, type Refusal, rateRefusal, refusalBeforeCounting } from './limits.ts';
import { type AnswerOut, type Answers, type Connector, type Outbox, type PlatformSecrets, SecretsRefused } from './ports.ts';
import type { DeploymentRuntimeStore, HeldDeployment, RecordedUpdate, RelayContext } from './runtime-store.ts';
import { answerPress, approverOf, type ChatSettle, followApprovals } from './chat-approvals.ts';
import type { InboundPress } from './ports.ts';

/** Times an update whose reply was cut off by a process stopping is answered again. */
const ANSWER_AGAIN = 2;

/**
 * Sessions as a deployment uses them: the sessions service behind it (composed in
 * `services.ts`), so the deployments' rules need nothing else of it.
 */
export interface Conversations {
  /** A new session of the agent owned by `ownerId`, titled after the chat. */
  open(ownerId: string, agentId: string, title: string): Promise<string>;
  /**
   * Relays what a person wrote as a prompt of theirs, the owner's access deciding; the seq of
   * its start event, or `saved-already` when a prompt of that id was saved before. A session
   * gone throws the domain's NOT_FOUND.
   */
  post(
    ownerId: string,
    sessionId: string,
    text: string,
    relay: { sender: string; promptId: string; whileReplying?: WhileReplying },
  ): Promise<{ after: number | null } | { conflict: 'saved-already' }>;
}

/** One deployment as this instance runs it, for the rules that answer its updates. */
export interface DeploymentRun {
  deployment: HeldDeployment;
  secrets: PlatformSecrets;
  connector: Connector;
  /** Aborted when this runner stops (its lease lost, the deployment stopped, a shutdown). */
  signal: AbortSignal;
  /** Whether this instance may still answer: it holds the lease, by its own clock with a margin. */
  holds(): boolean;
  /** False once a shutdown began: replies under way finish, no new prompt starts. */
  accepting(): boolean;
  /** The platform refused the secrets while answering. */
  revoked(reason: string): Promise<void>;
}

/** Stops answering an update here, leaving it to be answered later (by this runner or the next holder). */
export class LeftForLater extends Error {
  override name = 'LeftForLater';
}

export interface RelayDependencies {
  store: DeploymentRuntimeStore;
  conversations: Conversations;
  answers: Answers;
  defaults: LimitDefaults;
  /** Makes the links in tools' results absolute: a chat reaches the media where the service is now. */
  links: MediaLinks;
  /** Answers tool calls that wait for approval, as the deployment's owner. */
  approvals: ChatSettle;
}

/**
 * Answers a recorded update: refused by the deployment's bounds (told once per period), or
 * relayed into the chat's session as the person's prompt and the agent's reply carried back as
 * it grows. Safe to run again for the same update at any point (a restart, another instance):
 * the prompt is saved under the update's prompt id, so only once; the answer edits the messages
 * already sent. Calls `saved` once the prompt is in its session (or the update was refused), so
 * the chat's next update may be saved meanwhile; for a prompt saved before, once its reply ended
 * or was asked again. Returns when it is answered, or throws LeftForLater.
 */
export function relayRules({ store, conversations, answers, defaults, links, approvals }: RelayDependencies) {
  async function refusalFor(run: DeploymentRun, ctx: RelayContext, chatId: string, update: RecordedUpdate): Promise<Refusal | null> {
    const spentToday = await store.spentToday(run.deployment.id);
    const before = refusalBeforeCounting({
      config: ctx.config,
      platform: ctx.platform,
      conversationId: update.conversation.id,
      spentToday,
      defaults,
      now: new Date(),
    });
    if (before) return before;
    const perMinute = chatRateOf(ctx.config, defaults);
    const counted = await store.countMessage(chatId, perMinute, RATE_WINDOW_MS);
    return counted.allowed ? null : rateRefusal(perMinute, counted.resetAt);
  }

  /** Saves the person's prompt in the chat's session (a new one if it has none, or it was deleted); its start seq. */
  async function relay(
    run: DeploymentRun,
    ctx: RelayContext,
    chat: { id: string; sessionId: string | null },
    update: RecordedUpdate,
    promptId: string,
  ) {
    if (!run.accepting()) throw new LeftForLater();
    const sender = await store.sender(ctx.platform, update.senderRef, update.senderName);
    for (let sessionId = chat.sessionId; ; sessionId = null) {
      if (!sessionId) {
        sessionId = await conversations.open(ctx.userId, ctx.agentId, `${update.conversation.title} (${ctx.platform})`);
        await store.setChatSession(chat.id, sessionId);
        chat.sessionId = sessionId;
      }
      try {
        const whileReplying = ctx.config.while_replying;
        const posted = await conversations.post(ctx.userId, sessionId, update.text, { sender, promptId, whileReplying });
        // Saved already (a runner that lost its lease got there first): follow that one.
        return { sessionId, after: 'conflict' in posted ? null : posted.after };
      } catch (e) {
        if (!(isDomainError(e) && e.code === 'NOT_FOUND' && chat.sessionId === sessionId)) throw e;
        // The owner deleted the chat's session: the chat goes on in a new one.
      }
    }
  }

  async function tell(outbox: Outbox, chatId: string, refusal: Refusal, replyTo: string) {
    if (await store.noticeDue(chatId, refusal.reason, refusal.until)) await outbox.notice(refusal.text, replyTo);
  }

  /** Shows the final answer, trying again while this runner may (Telegram away for a while). */
  async function finish(run: DeploymentRun, out: AnswerOut, text: string, wait: (attempt: number) => Promise<void>) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await out.finish(text);
      } catch (e) {
        if (e instanceof SecretsRefused) {
          await run.revoked(e.reason);
          throw new LeftForLater();
        }
        if (!run.holds()) throw new LeftForLater();
        await wait(attempt);
      }
    }
  }

  async function answer(
    run: DeploymentRun,
    update: RecordedUpdate,
    wait: (attempt: number) => Promise<void>,
    saved: () => void = () => {},
  ): Promise<void> {
    const ctx = await store.relayContext(run.deployment.id);
    if (!ctx?.running || !ctx.valid) throw new LeftForLater();
    const chat = await store.chat(run.deployment.id, update.conversation);
    const outbox = run.connector.deliver(run.secrets, update.conversation);
    let promptId = update.promptId;
    let at = await answers.outcome(promptId).then((s) => (s ? { sessionId: s.sessionId, after: null as number | null } : null));
    if (!at) {
      const refusal = await refusalFor(run, ctx, chat.id, update);
      if (refusal) {
        if (refusal.reason === 'cap')
          await store.capReached(run.deployment.id, refusal.until, 'Its daily manna cap is reached: it answers again after midnight (UTC)');
        await tell(outbox, chat.id, refusal, update.messageRef).catch(async (e) => {
          if (e instanceof SecretsRefused) await run.revoked(e.reason);
          throw e;
        });
        await store.finishUpdate(update.id, 'refused');
        return;
      }
      at = await relay(run, ctx, chat, update, promptId);
      saved();
    }
    // A prompt saved before (a restart, a lease taken over) holds the chat's next update until its
    // reply ends or is asked again: a re-asked prompt comes before what the person wrote after it.
    const out = outbox.answer({
      messageRef: update.messageRef,
      refs: update.replyRefs,
      sent: (refs) => store.setReplyRefs(update.id, refs),
    });
    // A call that waits for approval is told in the chat; the reply stays followed while it waits.
    const asked = followApprovals(outbox, update.messageRef, approverOf(ctx.platform, ctx.config));
    try {
      for (let attempts = update.attempts; ; attempts++) {
        out.typing();
        const state = await answers.awaitOutcome({
          ...at,
          promptId,
          onText: (text) => out.show(text.trim()),
          onToolCall: asked.change,
          signal: run.signal,
        });
        if (typeof state === 'string' || !run.holds()) throw new LeftForLater();
        await asked.done();
        const reply = state.replies[0] ?? null;
        if (reply?.interrupted && attempts < ANSWER_AGAIN) {
          const next = newId();
          if (!(await store.retryUpdate(update.id, promptId, next))) throw new LeftForLater();
          promptId = next;
          at = await relay(run, ctx, chat, update, promptId);
          saved();
          continue;
        }
        saved();
        await finish(run, out, answerText(reply, links), wait);
        await store.finishUpdate(update.id, reply?.status === 'complete' ? 'answered' : 'failed');
        return;
      }
    } finally {
      // Given up or done: nothing of it may go on showing the agent at work.
      out.close();
    }
  }

  /** A press of a button in one of the deployment's chats. */
  async function press(run: DeploymentRun, p: InboundPress) {
    const outbox = run.connector.deliver(run.secrets, p.conversation);
    const ctx = await store.relayContext(run.deployment.id);
    if (!ctx?.running || !ctx.valid) return;
    const chat = await store.chat(run.deployment.id, p.conversation);
    const approver = approverOf(ctx.platform, ctx.config);
    await answerPress(p, { outbox, ownerId: ctx.userId, approver, sessionId: chat.sessionId }, approvals);
  }

  return { answer, press };
}

export type RelayRules = ReturnType<typeof relayRules>;
