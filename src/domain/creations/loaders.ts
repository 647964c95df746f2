import DataLoader from 'dataloader';
import type { Viewer } from '../core/viewer.ts';
import type { CreationStore } from './store.ts';

/** Per request: whether the caller liked each creation, one query for any number of them. */
export function likedByViewerLoader(store: Pick<CreationStore, 'likedAmong'>, viewer: Viewer) {
  return new DataLoader<string, boolean>(async (creationIds) => {
    const liked = await store.likedAmong(viewer, creationIds);
    return creationIds.map((id) => liked.has(id));
  });
}
