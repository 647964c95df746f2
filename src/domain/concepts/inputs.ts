import { z } from 'zod';

export const MAX_CONCEPT_IMAGES = 25;

const conceptImageSchema = z.object({
  image: z.string().max(2048, 'must be at most 2048 characters').url('must be a URL'),
  usageInstructions: z.string().max(2000, 'must be at most 2000 characters').default(''),
});

export const conceptFieldsSchema = z.object({
  name: z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters'),
  /** The agent this concept belongs to (one of the caller's own), or null to detach it. */
  agent: z.string().min(1).nullable(),
  usageInstructions: z.string().max(5000, 'must be at most 5000 characters'),
  images: z
    .array(conceptImageSchema)
    .min(1, 'must have at least 1 image')
    .max(MAX_CONCEPT_IMAGES, `must have at most ${MAX_CONCEPT_IMAGES} images`),
});

export const conceptPatchSchema = conceptFieldsSchema.partial();
export const conceptCreateSchema = conceptFieldsSchema.partial().required({ name: true, images: true });

export type ConceptPatch = z.output<typeof conceptPatchSchema>;
