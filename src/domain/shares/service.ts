import { forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { SessionService } from '../sessions/index.ts';
import { reactionCounts, reactionsView } from '../core/views.ts';
import type { Viewer } from '../core/viewer.ts';
import type { ShareStore } from './store.ts';

export const SHARE_NOT_FOUND = 'Shared session not found';
export const MESSAGE_NOT_IN_SESSION = 'Message not found in this session';

/** Someone as a share shows them: a name and a picture, never an id. */
export interface SharedPerson {
  username: string;
  userImage: string | null;
  type: 'user' | 'agent';
}

/**
 * A session frozen up to a message, readable by anyone with its id. It holds only what a
 * reader should see: no budgets, no memory, no user ids, no thoughts, no later messages.
 */
export interface SharedSession {
  shareId: string;
  title: string;
  createdAt: Date;
  owner: { username: string; userImage: string | null };
  session: { id: string; title: string | null; createdAt: Date; agents: { key: string; name: string; image: string | null }[] };
  messages: {
    id: string;
    role: string;
    content: string;
    attachments: string[];
    sender: SharedPerson | null;
    reactions: { reaction: string; count: number }[];
    createdAt: Date;
  }[];
}

export function shareService(store: ShareStore, sessions: Pick<SessionService, 'permissionIn'>) {
  async function read(shareId: string): Promise<SharedSession> {
    const share = canNameARow(shareId) ? await store.share(shareId) : null;
    if (!share?.public) throw notFound(SHARE_NOT_FOUND);
    const messages = share.upTo !== null ? await store.messagesAsOf(share.session.id, share.upTo, share.createdAt) : [];
    return {
      shareId: share.id,
      title: share.title,
      createdAt: share.createdAt,
      owner: share.owner,
      session: share.session,
      messages: messages.map(({ reactions, ...m }) => ({ ...m, reactions: reactionCounts(reactionsView(reactions)) })),
    };
  }

  return {
    /** Operation 18: public, no key. */
    read,

    /**
     * Freezes the session at a finished message: the one named (it must be in this session), or
     * else the latest. Owners only. `title` defaults to the session's.
     */
    async create(viewer: Viewer, sessionId: string, options: { messageId?: string; title?: string } = {}): Promise<SharedSession> {
      const permission = await sessions.permissionIn(viewer, sessionId);
      if (permission !== 'owner')
        throw forbidden(permission ? 'Only an owner of this session can share it' : 'You do not have access to this session');
      const { messageId } = options;
      const [title, upTo] = await Promise.all([
        store.sessionTitle(sessionId),
        messageId === undefined || canNameARow(messageId) ? store.finishedMessage(sessionId, messageId) : null,
      ]);
      if (messageId !== undefined && !upTo) throw notFound(MESSAGE_NOT_IN_SESSION);
      const shareId = await store.create({
        sessionId,
        ownerId: viewer.id,
        messageId: upTo,
        title: options.title ?? title ?? 'Untitled session',
      });
      return read(shareId);
    },

    /** Takes a share down for good; only whoever made it may. */
    async delete(viewer: Viewer, shareId: string): Promise<void> {
      const ownerId = canNameARow(shareId) ? await store.ownerOf(shareId) : null;
      if (!ownerId) throw notFound('Share not found');
      if (ownerId !== viewer.id) throw forbidden('Only share owner can delete this share');
      await store.delete(shareId);
    },
  };
}

export type ShareService = ReturnType<typeof shareService>;
