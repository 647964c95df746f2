import { badInput, forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { nonEmptyPatch, parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { isVisibleTo } from '../core/visibility.ts';
import { conceptCreateSchema, conceptPatchSchema } from './inputs.ts';
import type { ConceptQuery, ConceptStore, ConceptWithImages } from './store.ts';

export type { ConceptWithImages } from './store.ts';

export const CONCEPT_NOT_FOUND = 'Concept not found';

export function conceptService(store: ConceptStore) {
  /** A concept may belong to one of the caller's own agents only. */
  async function checkAgent(viewer: Viewer, agentId: string | null | undefined) {
    if (!agentId) return;
    const ownerId = canNameARow(agentId) ? await store.agentOwnerOf(agentId) : null;
    if (ownerId !== viewer.id) throw badInput('agent not found among your agents', ['agent']);
  }

  return {
    async get(viewer: Viewer, id: string, query?: ConceptQuery): Promise<ConceptWithImages> {
      const concept = canNameARow(id) ? await store.find(id, query) : null;
      if (!concept) throw notFound(CONCEPT_NOT_FOUND);
      if (!isVisibleTo(viewer, concept, concept.userId)) throw forbidden('You do not have access to this concept');
      return concept;
    },

    async create(viewer: Viewer, raw: unknown, query?: ConceptQuery): Promise<ConceptWithImages> {
      const input = parseInput(conceptCreateSchema, raw);
      await checkAgent(viewer, input.agent);
      return store.create(viewer.id, input, query);
    },

    /** Only the fields present change; `images`, when sent, replaces the whole list. */
    async update(viewer: Viewer, id: string, raw: unknown, query?: ConceptQuery): Promise<ConceptWithImages> {
      const ownerId = canNameARow(id) ? await store.ownerOf(id) : null;
      if (!ownerId) throw notFound(CONCEPT_NOT_FOUND);
      if (ownerId !== viewer.id) throw forbidden('Only the owner of this concept can update it');
      const patch = nonEmptyPatch(parseInput(conceptPatchSchema, raw), 'concept');
      await checkAgent(viewer, patch.agent);
      return store.update(id, patch, query);
    },
  };
}

export type ConceptService = ReturnType<typeof conceptService>;
