import { z } from 'zod';
import { nameField, text, urlField } from '../core/validation.ts';

export const MAX_CONCEPT_IMAGES = 25;

const conceptImageSchema = z.object({
  image: urlField,
  usageInstructions: text(2000).default(''),
});

export const conceptFieldsSchema = z.object({
  name: nameField,
  /** The agent this concept belongs to (one of the caller's own), or null to detach it. */
  agent: z.string().min(1).nullable(),
  usageInstructions: text(5000),
  images: z
    .array(conceptImageSchema)
    .min(1, 'must have at least 1 image')
    .max(MAX_CONCEPT_IMAGES, `must have at most ${MAX_CONCEPT_IMAGES} images`),
});

export const conceptPatchSchema = conceptFieldsSchema.partial();
export const conceptCreateSchema = conceptFieldsSchema.partial().required({ name: true, images: true });

export type ConceptPatch = z.output<typeof conceptPatchSchema>;
export type ConceptCreate = z.output<typeof conceptCreateSchema>;
