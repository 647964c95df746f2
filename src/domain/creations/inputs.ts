import { z } from 'zod';
import { text } from '../core/validation.ts';

/** Creations one bulk change may name. */
export const MAX_BULK_CREATIONS = 100;

/** What an owner may change of a creation: its name, whether it is public, and whether it is deleted. */
export const creationPatchSchema = z.object({
  name: text(500).trim().min(1, 'must not be empty').optional(),
  public: z.boolean({ error: 'must be true or false' }).optional(),
  deleted: z.boolean({ error: 'must be true or false' }).optional(),
});

export const creationBulkPatchSchema = creationPatchSchema.extend({
  creationIds: z
    .array(z.string({ error: 'must be a creation id' }).min(1, 'must not be empty').max(200, 'is too long'), {
      error: 'must be a list of creation ids',
    })
    .min(1, 'must name at least one creation')
    .max(MAX_BULK_CREATIONS, `must name at most ${MAX_BULK_CREATIONS} creations`)
    .transform((ids) => [...new Set(ids)]),
});
