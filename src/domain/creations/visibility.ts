import type { Prisma } from '../../generated/prisma/client.ts';
import type { Viewer } from '../viewer.ts';
import { visibleToFilter } from '../visibility.ts';

/** A creation is visible when it is not deleted and is public or the caller's own. */
export const visibleCreations = (viewer: Viewer): Prisma.CreationWhereInput => ({ deleted: false, ...visibleToFilter(viewer, 'userId') });
