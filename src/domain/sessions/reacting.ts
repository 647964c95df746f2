import type { EventBus } from '../core/bus.ts';
import { notFound, unprocessable } from '../core/errors.ts';
import type { ReactionsView } from '../core/events.ts';
import { canNameARow } from '../core/ids.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { reactionCounts, reactionsView } from '../core/views.ts';
import type { SessionAccess } from '../access/service.ts';
import { reactionSchema } from './inputs.ts';
import { EXCLUSIVE } from './reactions.ts';
import { ReactionLimitReached, type SessionStore } from './store.ts';

export const MESSAGE_NOT_FOUND = 'Message not found';

/** Reactions to messages, for anyone with access to their session. */
export function reactionRules(store: SessionStore, bus: EventBus, access: SessionAccess, work: { reactionsPerUserMessage: number }) {
  return {
    /**
     * Operation 6: toggles the caller's reaction on a message; `thumbs_up` and `thumbs_down`
     * replace each other.
     */
    async react(viewer: Viewer, raw: unknown): Promise<{ added: boolean; messageId: string; reactions: ReactionsView }> {
      const { messageId, reaction } = parseInput(reactionSchema, raw);
      const sessionId = canNameARow(messageId) ? await store.sessionOfMessage(messageId) : null;
      if (!sessionId) throw notFound(MESSAGE_NOT_FOUND);
      await access.requireAccess(viewer, sessionId);
      const limit = work.reactionsPerUserMessage;
      let toggled: Awaited<ReturnType<SessionStore['toggleReaction']>>;
      try {
        toggled = await store.toggleReaction({ messageId, userId: viewer.id, reaction, replaces: EXCLUSIVE.get(reaction), limit });
      } catch (e) {
        if (e instanceof ReactionLimitReached)
          throw unprocessable(`Reaction limit reached: at most ${limit} reactions per user on one message`);
        throw e;
      }
      const reactions = reactionsView(toggled.reactions);
      await bus.publish(sessionId, {
        type: 'reaction',
        messageId,
        userId: viewer.id,
        userReactions: reactions[viewer.id] ?? [],
        counts: reactionCounts(reactions),
      });
      return { added: toggled.added, messageId, reactions };
    },

    /**
     * The caller's own reactions on a message (what a reaction event about someone else does not
     * say); empty for a message they cannot see.
     */
    async myReactions(viewer: Viewer, messageId: string): Promise<string[]> {
      if (!canNameARow(messageId)) return [];
      return store.reactionsOf(messageId, viewer.id);
    },
  };
}
