import type { Db } from '../../db/database.ts';
import type { ShareStore } from './store.ts';

export function prismaShareStore(db: Db): ShareStore {
  return {
    async share(id) {
      const share = await db.share.findUnique({
        where: { id },
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
      });
      if (!share) return null;
      const { session } = share;
      return {
        id: share.id,
        title: share.title,
        public: share.public,
        createdAt: share.createdAt,
        owner: share.owner,
        upTo: share.message?.ordinal ?? null,
        session: {
          id: session.id,
          title: session.title,
          createdAt: session.createdAt,
          agents: session.agents.map(({ agent }) => ({ key: agent.user.username, name: agent.name, image: agent.image })),
        },
      };
    },

    messagesAsOf: (sessionId, upTo, asOf) =>
      db.message.findMany({
        where: { sessionId, ordinal: { lte: upTo }, status: { not: 'streaming' }, updatedAt: { lte: asOf } },
        orderBy: { ordinal: 'asc' },
        select: {
          id: true,
          role: true,
          content: true,
          attachments: true,
          createdAt: true,
          sender: { select: { username: true, userImage: true, type: true } },
          reactions: { where: { createdAt: { lte: asOf } }, select: { userId: true, reaction: true } },
        },
      }),

    async sessionTitle(sessionId) {
      return (await db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { title: true } })).title;
    },

    async finishedMessage(sessionId, messageId) {
      const message = await db.message.findFirst({
        where: { sessionId, status: { not: 'streaming' }, ...(messageId !== undefined ? { id: messageId } : {}) },
        ...(messageId === undefined ? { orderBy: { ordinal: 'desc' as const } } : {}),
        select: { id: true },
      });
      return message?.id ?? null;
    },

    async create(share) {
      return (await db.share.create({ data: share, select: { id: true } })).id;
    },

    async ownerOf(shareId) {
      return (await db.share.findUnique({ where: { id: shareId }, select: { ownerId: true } }))?.ownerId ?? null;
    },

    async delete(shareId) {
      await db.share.delete({ where: { id: shareId } });
    },
  };
}
