/** The tools folder's front: a tool's definition, and the registry of the tools loaded from a folder. */
export { toolDefinitionSchema } from './definition.ts';
export type { ToolDefinition, ToolParameter } from './definition.ts';
export { loadToolRegistry } from './registry.ts';
export type { ToolRegistry } from './registry.ts';
