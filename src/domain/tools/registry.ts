import { readdir, readFile } from 'node:fs/promises';
import { basename, extname, join, relative } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { AddressGuard } from '../core/outbound.ts';
import { formatPath } from '../core/validation.ts';
import { toolDefinitionSchema, type ToolDefinition } from './definition.ts';

export class ToolRegistryError extends Error {
  override name = 'ToolRegistryError';
}

export interface ToolRegistry {
  /** Tools a caller may use: active and visible, in their `order`. */
  listAvailable(): ToolDefinition[];
  /** Whether `key` is one of the tools in `listAvailable()`. */
  isAvailable(key: string): boolean;
  /** Whether an agent may enable `key`: an available tool, or an active hidden helper. */
  canEnable(key: string): boolean;
  get(key: string): ToolDefinition | undefined;
  /** Every tool of the registry, hidden and inactive ones included. */
  all(): ToolDefinition[];
}

/**
 * Loads every `*.yaml` / `*.yml` in `dir`; any broken file stops start-up, naming file and field.
 * With `guard`, a tool served at an address the outbound rules refuse does too (a host that
 * cannot be resolved yet passes: each call checks again).
 */
export async function loadToolRegistry(dir: string, guard?: AddressGuard): Promise<ToolRegistry> {
  let files: string[];
  try {
    files = (await readdir(dir)).filter((f) => ['.yaml', '.yml'].includes(extname(f))).sort();
  } catch (e) {
    throw new ToolRegistryError(`Tool registry: cannot read ${dir}: ${(e as Error).message}`);
  }
  if (files.length === 0) throw new ToolRegistryError(`Tool registry: no tool files (*.yaml) in ${dir}`);

  const byKey = new Map<string, ToolDefinition>();
  for (const file of files) {
    const where = relative(process.cwd(), join(dir, file)) || file;
    let raw: unknown;
    try {
      raw = parseYaml(await readFile(join(dir, file), 'utf8'));
    } catch (e) {
      throw new ToolRegistryError(`Tool registry: ${where}: not valid YAML: ${(e as Error).message.split('\n')[0]}`);
    }
    const parsed = toolDefinitionSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const field = formatPath(issue.path.filter((p): p is string | number => typeof p !== 'symbol')) || '(file)';
      throw new ToolRegistryError(`Tool registry: ${where}: ${field}: ${issue.message}`);
    }
    const tool = parsed.data;
    if (tool.key !== basename(file, extname(file)))
      throw new ToolRegistryError(`Tool registry: ${where}: key: "${tool.key}" must match the file name`);
    if (byKey.has(tool.key)) throw new ToolRegistryError(`Tool registry: ${where}: key: "${tool.key}" is already defined by another file`);
    const handler = tool.handler;
    const refusal = guard && typeof handler === 'object' ? await guard.refusal(handler.http, { unresolved: 'allow' }) : null;
    if (refusal) {
      throw new ToolRegistryError(
        `Tool registry: ${where}: handler.http: ${refusal} (OUTBOUND_ALLOW_HTTP and OUTBOUND_ALLOW_PRIVATE allow a tool service over http or on a private network: docs/outbound.md)`,
      );
    }
    byKey.set(tool.key, tool);
  }

  const available = [...byKey.values()]
    .filter((t) => t.active && t.visible)
    .sort((a, b) => a.order - b.order || a.key.localeCompare(b.key));
  const availableKeys = new Set(available.map((t) => t.key));
  return {
    listAvailable: () => available,
    isAvailable: (key) => availableKeys.has(key),
    canEnable: (key) => byKey.get(key)?.active === true,
    get: (key) => byKey.get(key),
    all: () => [...byKey.values()],
  };
}
