/** The concepts service's front: its rules and their inputs. */
export { conceptPatchSchema } from './inputs.ts';
export { conceptService } from './service.ts';
export type { ConceptService, ConceptWithImages } from './service.ts';
export { conceptStore } from './store.ts';
