import { isVisibleTo } from '../core/visibility.ts';
import type { Viewer } from '../core/viewer.ts';

/**
 * Who sees what of a collection. The rules for rows in hand; the store writes the same rules as
 * statements (`store.ts`), and a test holds the two together on every mix of owner, public and
 * deleted.
 */

/** A collection is read by its owner, and by everyone when it is public. */
export const canReadCollection = (viewer: Viewer | null, collection: { public: boolean; userId: string }) =>
  isVisibleTo(viewer, collection, collection.userId);

/**
 * A creation in a collection is shown to a reader when both the reader and the collection's owner
 * may see it: it is not deleted, and it is public, or it is private and reader, owner and author
 * are one person. So a collection never shows (counts, or makes a cover of) a creation its owner
 * could not see, nor one its reader could not; a private creation shows only in its author's own
 * collections, to its author.
 */
export const isShownIn = (
  viewer: Viewer | null,
  collection: { userId: string },
  creation: { public: boolean; deleted: boolean; userId: string },
) => !creation.deleted && (creation.public || (viewer?.id === creation.userId && collection.userId === creation.userId));

/** What may go into a collection: a creation its owner may see. */
export const canHold = (owner: Viewer, creation: { public: boolean; deleted: boolean; userId: string }) =>
  !creation.deleted && isVisibleTo(owner, creation, creation.userId);
