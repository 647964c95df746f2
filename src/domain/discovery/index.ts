/**
 * The discovery folder's front: who may see which rows, as filters the GraphQL types hand to
 * Pothos's Prisma plugin for the relations it plans (a creator's agents, a task's creations).
 */
export { visibleCreations, visibleToFilter } from './store.ts';
