import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { bindMigrationAwareSqlAdapterFactory, type SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import type { SchemaEngine } from '@prisma/schema-engine-wasm';

const require = createRequire(import.meta.url);
const bindingsModule = './schema_engine_bg.js';

let engineModule: Promise<typeof import('@prisma/schema-engine-wasm')> | undefined;

// The package's entry imports its .wasm as an ES module, which Node 20 only allows behind a
// flag; instantiating the WebAssembly ourselves keeps `node`/`tsx` flag-free.
async function loadEngineModule() {
  const bindings = await import('@prisma/schema-engine-wasm/schema_engine_bg');
  const wasmPath = join(dirname(require.resolve('@prisma/schema-engine-wasm')), 'schema_engine_bg.wasm');
  const { instance } = await WebAssembly.instantiate(await readFile(wasmPath), {
    [bindingsModule]: bindings as unknown as WebAssembly.ModuleImports,
  });
  const exports = instance.exports as WebAssembly.Exports & { __wbindgen_start(): void };
  (bindings as unknown as { __wbg_set_wasm(w: unknown): void }).__wbg_set_wasm(exports);
  exports.__wbindgen_start();
  return bindings as unknown as typeof import('@prisma/schema-engine-wasm');
}

export async function openSchemaEngine(
  adapterFactory: SqlMigrationAwareDriverAdapterFactory,
  datamodels?: [string, string][],
  log: (line: string) => void = () => {},
): Promise<SchemaEngine> {
  engineModule ??= loadEngineModule();
  const { SchemaEngine } = await engineModule;
  return SchemaEngine.new({ datamodels }, log, bindMigrationAwareSqlAdapterFactory(adapterFactory));
}

export const noFilters = { externalTables: [], externalEnums: [] };
