import type { Db } from '../../db/database.ts';
import type { Concept, ConceptImage, Prisma } from '../../generated/prisma/client.ts';
import type { ConceptCreate, ConceptPatch } from './inputs.ts';

/** The relations a reader adds to a concept (GraphQL's selection); its images always come. */
export type ConceptQuery = { include?: Prisma.ConceptInclude };
export type ConceptWithImages = Concept & { images: ConceptImage[] };

/** Where concepts and their images are kept. */
export interface ConceptStore {
  find(id: string, query?: ConceptQuery): Promise<ConceptWithImages | null>;
  /** The concept's owner, or null when there is no such concept. */
  ownerOf(id: string): Promise<string | null>;
  /** The owner of an agent a concept may be attached to, or null when there is no such agent. */
  agentOwnerOf(agentId: string): Promise<string | null>;
  create(ownerId: string, input: ConceptCreate, query?: ConceptQuery): Promise<ConceptWithImages>;
  /** Writes the fields present; `images`, when present, replaces the whole list. */
  update(id: string, patch: ConceptPatch, query?: ConceptQuery): Promise<ConceptWithImages>;
}

/** Images keep the order they were given in. */
const withImages = (query: ConceptQuery = {}) =>
  ({ include: { images: { orderBy: { position: 'asc' as const } }, ...query.include } }) as const;

const imageRows = (images: NonNullable<ConceptPatch['images']>) =>
  images.map((img, position) => ({ position, image: img.image, usageInstructions: img.usageInstructions }));

export function conceptStore(db: Db): ConceptStore {
  return {
    find: (id, query) => db.concept.findUnique({ where: { id }, ...withImages(query) }),

    async ownerOf(id) {
      return (await db.concept.findUnique({ where: { id }, select: { userId: true } }))?.userId ?? null;
    },

    async agentOwnerOf(agentId) {
      return (await db.agent.findUnique({ where: { id: agentId }, select: { ownerId: true } }))?.ownerId ?? null;
    },

    create: (ownerId, input, query) =>
      db.concept.create({
        data: {
          name: input.name,
          usageInstructions: input.usageInstructions,
          userId: ownerId,
          agentId: input.agent ?? null,
          images: { create: imageRows(input.images) },
        },
        ...withImages(query),
      }),

    update: (id, patch, query) =>
      db.concept.update({
        where: { id },
        data: {
          name: patch.name,
          usageInstructions: patch.usageInstructions,
          agentId: patch.agent,
          images: patch.images ? { deleteMany: {}, create: imageRows(patch.images) } : undefined,
        },
        ...withImages(query),
      }),
  };
}
