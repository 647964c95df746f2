import { z } from 'zod';
import type { Prisma } from '../../generated/prisma/client.ts';
import { visibleCreations } from '../core/visibility.ts';
import { canNameARow } from '../core/ids.ts';
import { parseInput, text } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { visibleToFilter } from '../core/visibility.ts';

/**
 * The discovery lists (agents, models, creations a viewer may see): each is the visibility rule
 * of its single-row lookup, narrowed by the filters a client sends. A filter never widens what
 * the rule allows, so `owner: someone` lists only that someone's public rows.
 */
const idField = z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters').refine(canNameARow, 'names no row');
const textFilter = text(200)
  .trim()
  .transform((s) => s || undefined);

const common = { owner: idField.optional(), public: z.boolean().optional(), text: textFilter.optional() };
export const agentFilterSchema = z.object(common);
export const modelFilterSchema = z.object({ ...common, baseModel: text(200).optional() });
export const creationFilterSchema = z.object({ ...common, agent: idField.optional(), tool: text(200).optional() });

type Nullable<T> = { [K in keyof T]?: T[K] | null };
/** GraphQL sends null for an omitted field; the schemas read that as "no filter". */
const withoutNulls = (raw: Record<string, unknown> | null | undefined) =>
  Object.fromEntries(Object.entries(raw ?? {}).filter(([, v]) => v !== null && v !== undefined));

const contains = (s: string) => ({ contains: s, mode: 'insensitive' as const });

/** `public: false` means the viewer's own private rows: the rule allows no one else's. */
const publicFilter = <F extends string>(viewer: Viewer, ownerColumn: F, isPublic: boolean | undefined) =>
  isPublic === undefined ? {} : isPublic ? { public: true } : ({ public: false, [ownerColumn]: viewer.id } as Record<string, unknown>);

export function agentListWhere(
  viewer: Viewer,
  raw: Nullable<z.input<typeof agentFilterSchema>> | null | undefined,
): Prisma.AgentWhereInput {
  const f = parseInput(agentFilterSchema, withoutNulls(raw));
  return {
    AND: [
      visibleToFilter(viewer, 'ownerId'),
      publicFilter(viewer, 'ownerId', f.public),
      f.owner ? { ownerId: f.owner } : {},
      f.text ? { OR: [{ name: contains(f.text) }, { description: contains(f.text) }, { user: { username: contains(f.text) } }] } : {},
    ],
  };
}

export function modelListWhere(
  viewer: Viewer,
  raw: Nullable<z.input<typeof modelFilterSchema>> | null | undefined,
): Prisma.ModelWhereInput {
  const f = parseInput(modelFilterSchema, withoutNulls(raw));
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

export function creationListWhere(
  viewer: Viewer,
  raw: Nullable<z.input<typeof creationFilterSchema>> | null | undefined,
): Prisma.CreationWhereInput {
  const f = parseInput(creationFilterSchema, withoutNulls(raw));
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
