import type { Db } from '../../db/database.ts';
import { forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { SessionService } from '../sessions/service.ts';
import { reactionCounts, reactionsView } from '../core/views.ts';
import type { Viewer } from '../core/viewer.ts';

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

export function shareService(db: Db, sessions: SessionService) {
  async function read(shareId: string): Promise<SharedSession> {
    const share = canNameARow(shareId)
      ? await db.share.findUnique({
          where: { id: shareId },
          include: {
            owner: { select: { username: true, userImage: true } },
            message: { select: { ordinal: true } },
            session: {
              select: {
                id: true,
                title: true,
                createdAt: true,
                agents: {
                  orderBy: { position: 'asc' },
                  select: { agent: { select: { name: true, image: true, user: { select: { username: true } } } } },
                },
              },
            },
          },
        })
      : null;
    if (!share || !share.public) throw notFound(SHARE_NOT_FOUND);
    const messages = share.message
      ? await db.message.findMany({
          // As they were when it was shared: a reply still being written then is left out even
          // once it has finished (it was last changed after), and so are later reactions.
          where: {
            sessionId: share.sessionId,
            ordinal: { lte: share.message.ordinal },
            status: { not: 'streaming' },
            updatedAt: { lte: share.createdAt },
          },
          orderBy: { ordinal: 'asc' },
          select: {
            id: true,
            role: true,
            content: true,
            attachments: true,
            createdAt: true,
            sender: { select: { username: true, userImage: true, type: true } },
            reactions: { where: { createdAt: { lte: share.createdAt } }, select: { userId: true, reaction: true } },
          },
        })
      : [];
    return {
      shareId: share.id,
      title: share.title,
      createdAt: share.createdAt,
      owner: share.owner,
      session: {
        id: share.session.id,
        title: share.session.title,
        createdAt: share.session.createdAt,
        agents: share.session.agents.map(({ agent }) => ({ key: agent.user.username, name: agent.name, image: agent.image })),
      },
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
      const [session, upTo] = await Promise.all([
        db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { title: true } }),
        messageId !== undefined
          ? canNameARow(messageId)
            ? db.message.findFirst({ where: { id: messageId, sessionId, status: { not: 'streaming' } }, select: { id: true } })
            : null
          : db.message.findFirst({
              where: { sessionId, status: { not: 'streaming' } },
              orderBy: { ordinal: 'desc' },
              select: { id: true },
            }),
      ]);
      if (messageId !== undefined && !upTo) throw notFound(MESSAGE_NOT_IN_SESSION);
      const share = await db.share.create({
        data: { sessionId, ownerId: viewer.id, messageId: upTo?.id ?? null, title: options.title ?? session.title ?? 'Untitled session' },
        select: { id: true },
      });
      return read(share.id);
    },

    /** Takes a share down for good; only whoever made it may. */
    async delete(viewer: Viewer, shareId: string): Promise<void> {
      const share = canNameARow(shareId) ? await db.share.findUnique({ where: { id: shareId }, select: { ownerId: true } }) : null;
      if (!share) throw notFound('Share not found');
      if (share.ownerId !== viewer.id) throw forbidden('Only share owner can delete this share');
      await db.share.delete({ where: { id: shareId } });
    },
  };
}

export type ShareService = ReturnType<typeof shareService>;
