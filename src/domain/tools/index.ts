/**
 * The tools folder's front: a tool's definition, the registry of the tools loaded from a folder,
 * and the tool host that runs them (its executors, its store and the queue of runs waiting).
 */
export { toolDefinitionSchema } from './definition.ts';
export type { ToolDefinition, ToolParameter } from './definition.ts';
export { createToolHost, toolExecutors } from './host.ts';
export { loadToolRegistry } from './registry.ts';
export type { ToolRegistry } from './registry.ts';
export { toolRunQueue } from './run-queue.ts';
export { toolStore } from './store.ts';
