import type { Db } from '../../db/database.ts';
import type { Concept, ConceptImage, Prisma } from '../../generated/prisma/client.ts';
import { badInput, forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { nonEmptyPatch, parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { isVisibleTo } from '../core/visibility.ts';
import { conceptCreateSchema, conceptPatchSchema, type ConceptPatch } from './inputs.ts';

export const CONCEPT_NOT_FOUND = 'Concept not found';

export type ConceptQuery = { include?: Prisma.ConceptInclude };
export type ConceptWithImages = Concept & { images: ConceptImage[] };

const withImages = (query: ConceptQuery = {}) =>
  ({ include: { images: { orderBy: { position: 'asc' as const } }, ...query.include } }) as const;

const imageRows = (images: NonNullable<ConceptPatch['images']>) =>
  images.map((img, position) => ({ position, image: img.image, usageInstructions: img.usageInstructions }));

export function conceptService(db: Db) {
  async function checkAgent(viewer: Viewer, agentId: string | null | undefined) {
    if (!agentId) return;
    const agent = canNameARow(agentId) ? await db.agent.findUnique({ where: { id: agentId }, select: { ownerId: true } }) : null;
    if (!agent || agent.ownerId !== viewer.id) throw badInput('agent not found among your agents', ['agent']);
  }

  return {
    async get(viewer: Viewer, id: string, query?: ConceptQuery): Promise<ConceptWithImages> {
      const concept = canNameARow(id) ? await db.concept.findUnique({ where: { id }, ...withImages(query) }) : null;
      if (!concept) throw notFound(CONCEPT_NOT_FOUND);
      if (!isVisibleTo(viewer, concept, concept.userId)) throw forbidden('You do not have access to this concept');
      return concept;
    },

    async create(viewer: Viewer, raw: unknown, query?: ConceptQuery): Promise<ConceptWithImages> {
      const input = parseInput(conceptCreateSchema, raw);
      await checkAgent(viewer, input.agent);
      return db.concept.create({
        data: {
          name: input.name,
          usageInstructions: input.usageInstructions,
          userId: viewer.id,
          agentId: input.agent ?? null,
          images: { create: imageRows(input.images) },
        },
        ...withImages(query),
      });
    },

    /** Only the fields present change; `images`, when sent, replaces the whole list. */
    async update(viewer: Viewer, id: string, raw: unknown, query?: ConceptQuery): Promise<ConceptWithImages> {
      const existing = canNameARow(id) ? await db.concept.findUnique({ where: { id }, select: { userId: true } }) : null;
      if (!existing) throw notFound(CONCEPT_NOT_FOUND);
      if (existing.userId !== viewer.id) throw forbidden('Only the owner of this concept can update it');
      const patch = nonEmptyPatch(parseInput(conceptPatchSchema, raw), 'concept');
      await checkAgent(viewer, patch.agent);
      return db.concept.update({
        where: { id },
        data: {
          name: patch.name,
          usageInstructions: patch.usageInstructions,
          agentId: patch.agent,
          images: patch.images ? { deleteMany: {}, create: imageRows(patch.images) } : undefined,
        },
        ...withImages(query),
      });
    },
  };
}

export type ConceptService = ReturnType<typeof conceptService>;
