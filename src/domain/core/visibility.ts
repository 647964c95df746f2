import type { Prisma } from '../../generated/prisma/client.ts';
import type { Viewer } from './viewer.ts';

/**
 * The service's one sharing rule for agents, concepts, models and creations: a row is visible
 * to its owner, and to everyone when it is public.
 */
export const isVisibleTo = (viewer: Viewer | null, row: { public: boolean }, ownerId: string) => row.public || viewer?.id === ownerId;

/** The same rule as a Prisma filter, given the name of the model's owner column. */
export const visibleToFilter = <F extends string>(viewer: Viewer, ownerColumn: F) => ({
  OR: [{ public: true }, { [ownerColumn]: viewer.id } as Record<F, string>],
});

/** A creation is visible when it is not deleted and is public or the caller's own. */
export const visibleCreations = (viewer: Viewer): Prisma.CreationWhereInput => ({ deleted: false, ...visibleToFilter(viewer, 'userId') });
