/** The creations service's front: its rules and their inputs. */
export { creationBulkPatchSchema, creationPatchSchema } from './inputs.ts';
export { creationService } from './service.ts';
export type { CreationQuery, CreationService } from './service.ts';
export { creationStore } from './store.ts';
