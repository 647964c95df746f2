import { z } from 'zod';
import { pageSchema } from '../core/cursors.ts';
import { nameField, text } from '../core/validation.ts';

/**
 * Collection input as the domain sees it. The per-request bound is a constant (a request names
 * at most this many creations); the per-collection and per-user bounds are settings.
 */
export const MAX_CREATIONS_PER_REQUEST = 100;
export const MAX_DESCRIPTION = 2_000;

const creationId = z.string({ error: 'must be a creation id' }).min(1, 'must not be empty').max(200, 'is too long');

/** Creation ids as a request names them: at most `MAX_CREATIONS_PER_REQUEST`, a repeated one counts once. */
const creationIds = z
  .array(creationId, { error: 'must be a list of creation ids' })
  .max(MAX_CREATIONS_PER_REQUEST, `must name at most ${MAX_CREATIONS_PER_REQUEST} creations`)
  .transform((ids) => [...new Set(ids)]);

const fields = {
  name: nameField,
  description: text(MAX_DESCRIPTION),
  public: z.boolean({ error: 'must be true or false' }),
};

export const collectionCreateSchema = z.object({
  ...fields,
  description: fields.description.default(''),
  public: fields.public.default(true),
  creationIds: creationIds.default([]),
});
export const collectionPatchSchema = z.object(fields).partial();
/** The creations to add to or remove from a collection: at least one. */
export const collectionChangeSchema = z.object({
  creationIds: creationIds.refine((ids) => ids.length > 0, 'must name at least one creation'),
});

export type CollectionCreate = z.output<typeof collectionCreateSchema>;
export type CollectionPatch = z.output<typeof collectionPatchSchema>;

/** The picker's list of collections: as many as a page may hold unless told fewer, so one call usually has them all. */
export const lightPageSchema = pageSchema.extend({ first: pageSchema.shape.first.removeDefault().default(100) });
