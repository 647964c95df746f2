/** The memory service's front: its rules and the store they are composed over. */
export { memoryService } from './service.ts';
export type { MemoryService } from './service.ts';
export { memoryStore } from './store.ts';
