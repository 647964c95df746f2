/**
 * The collections service's front: its rules, their inputs, and the filters of what a viewer
 * may see, which the GraphQL types hand to Pothos's Prisma plugin for the rows it plans.
 */
export { collectionChangeSchema, collectionCreateSchema, collectionPatchSchema, lightPageSchema } from './inputs.ts';
export { collectionService } from './service.ts';
export type { CollectionRead, CollectionService } from './service.ts';
export { collectionStore, readableCollections, shownItems } from './store.ts';
