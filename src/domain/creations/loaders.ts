import DataLoader from 'dataloader';
import type { Db } from '../../db/database.ts';
import type { Viewer } from '../core/viewer.ts';

/** Per request: whether the caller liked each creation, one query for any number of them. */
export function likedByViewerLoader(db: Db, viewer: Viewer) {
  return new DataLoader<string, boolean>(async (creationIds) => {
    const likes = await db.like.findMany({
      where: { userId: viewer.id, creationId: { in: [...creationIds] } },
      select: { creationId: true },
    });
    const liked = new Set(likes.map((l) => l.creationId));
    return creationIds.map((id) => liked.has(id));
  });
}
