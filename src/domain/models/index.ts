/** The models service's front: its rules and their inputs. */
export { modelPatchSchema } from './inputs.ts';
export { modelService } from './service.ts';
export type { ModelService } from './service.ts';
export { modelStore } from './store.ts';
