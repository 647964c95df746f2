import { loadConfig } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { applyMigrations } from '../db/migrate.ts';
import { createServices, type Services } from '../domain/services.ts';
import { loadToolRegistry } from '../domain/tools/registry.ts';

/** Opens the configured database (migrated) and runs `run` with the domain services over it. */
export async function withServices<T>(run: (services: Services) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const tools = await loadToolRegistry(config.toolsDir);
  const database = await openDatabase(config.database);
  try {
    await database.exclusively(() => applyMigrations(database.migrationAdapterFactory));
    return await run(createServices(database.prisma, tools, { config }));
  } finally {
    await database.close();
  }
}
