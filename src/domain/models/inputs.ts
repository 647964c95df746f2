import { z } from 'zod';
import { nameField } from '../core/validation.ts';
import { modelFilterSchema } from '../discovery/filters.ts';

/** What an owner may change of a model. parley does not delete models, so `deleted: true` is refused rather than ignored. */
export const modelPatchSchema = z.object({
  name: nameField.optional(),
  public: z.boolean({ error: 'must be true or false' }).optional(),
  deleted: z
    .boolean({ error: 'must be true or false' })
    .refine((d) => !d, 'models are not deleted through the API')
    .optional(),
});

const id = z.string().min(1, 'must not be empty').max(200, 'is too long');

/**
 * A numbered page of models as the original's "paginate" plugin took it: `page` from 1, `limit`
 * 25 unless told (at most 100); `userId` keeps one creator's, `modelId` (one or several) those models.
 */
export const modelPageSchema = z.object({
  page: z.coerce.number({ error: 'must be a number' }).int('must be a whole number').min(1, 'must be at least 1').max(100_000).default(1),
  limit: z.coerce
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(100, 'must be at most 100')
    .default(25),
  userId: modelFilterSchema.shape.owner,
  modelId: z
    .union([id, z.array(id).max(100, 'must name at most 100 models')])
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .optional(),
  public: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .transform((v) => v === 'true')
    .optional(),
});
