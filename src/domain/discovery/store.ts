import { Prisma } from '../../generated/prisma/client.ts';
import type { Viewer } from '../core/viewer.ts';
import type { AgentFilter, CreationFilter, ModelFilter } from './filters.ts';

/**
 * The store side of discovery: the sharing rule of core/visibility.ts and the list filters of
 * filters.ts written as statements (Prisma filters and SQL), for every store that reads what a
 * viewer may see. Written once here, so a list, a lookup by id and a search select the same rows.
 */

/** The sharing rule as a Prisma filter, given the name of the model's owner column. */
export const visibleToFilter = <F extends string>(viewer: Viewer, ownerColumn: F) => ({
  OR: [{ public: true }, { [ownerColumn]: viewer.id } as Record<F, string>],
});

/** A creation is visible when it is not deleted and is public or the caller's own. */
export const visibleCreations = (viewer: Viewer): Prisma.CreationWhereInput => ({ deleted: false, ...visibleToFilter(viewer, 'userId') });

/** `visibleCreations` in SQL, for the "Creation" row named `alias` in a raw statement. */
export function visibleCreationsSql(alias: string, viewerId: string): Prisma.Sql {
  const c = Prisma.raw(alias);
  return Prisma.sql`${c}.deleted = false AND (${c}.public OR ${c}."userId" = ${viewerId})`;
}

const contains = (s: string) => ({ contains: s, mode: 'insensitive' as const });

/** `public: false` means the viewer's own private rows: the rule allows no one else's. */
const publicFilter = <F extends string>(viewer: Viewer, ownerColumn: F, isPublic: boolean | undefined) =>
  isPublic === undefined ? {} : isPublic ? { public: true } : ({ public: false, [ownerColumn]: viewer.id } as Record<string, unknown>);

export function agentListWhere(viewer: Viewer, f: AgentFilter): Prisma.AgentWhereInput {
  return {
    AND: [
      visibleToFilter(viewer, 'ownerId'),
      publicFilter(viewer, 'ownerId', f.public),
      f.owner ? { ownerId: f.owner } : {},
      f.text ? { OR: [{ name: contains(f.text) }, { description: contains(f.text) }, { user: { username: contains(f.text) } }] } : {},
    ],
  };
}

export function modelListWhere(viewer: Viewer, f: ModelFilter): Prisma.ModelWhereInput {
  return {
    AND: [
      visibleToFilter(viewer, 'userId'),
      publicFilter(viewer, 'userId', f.public),
      f.owner ? { userId: f.owner } : {},
      f.baseModel ? { baseModel: f.baseModel } : {},
      f.text ? { OR: [{ name: contains(f.text) }, { loraTriggerText: contains(f.text) }] } : {},
    ],
  };
}

export function creationListWhere(viewer: Viewer, f: CreationFilter): Prisma.CreationWhereInput {
  return {
    AND: [
      visibleCreations(viewer),
      publicFilter(viewer, 'userId', f.public),
      f.owner ? { userId: f.owner } : {},
      f.agent ? { agentId: f.agent } : {},
      f.tool ? { tool: f.tool } : {},
      f.text ? { name: contains(f.text) } : {},
    ],
  };
}
