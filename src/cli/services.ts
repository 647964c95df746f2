import { loadConfig } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { applyMigrations } from '../db/migrate.ts';
import { createServices, type Services } from '../domain/services.ts';
import { loadToolRegistry } from '../domain/tools/registry.ts';
import { createLimits } from '../limits/index.ts';
import { createMetrics } from '../observability/metrics.ts';
import { createEventBus } from '../realtime/index.ts';

const log = {
  error: (obj: unknown, msg?: string) => console.error(msg, obj),
  warn: (obj: unknown, msg?: string) => console.error(msg, obj),
};

/**
 * The CLI's composition root: opens the configured database (migrated) and runs `run` with the
 * domain services over it, on the event bus the configuration names, so what a command publishes
 * (a revoked key, say) reaches every instance when they share Redis.
 */
export async function withServices<T>(run: (services: Services) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const tools = await loadToolRegistry(config.toolsDir);
  const database = await openDatabase(config.database);
  const bus = createEventBus(config);
  // A command streams nothing to clients, so its stream slots need not be shared.
  const limits = createLimits(config.limits, undefined, log);
  try {
    await database.exclusively(() => applyMigrations(database.migrationAdapterFactory));
    return await run(createServices(database.prisma, tools, { config, bus, streamLimits: limits.streams, log, metrics: createMetrics() }));
  } finally {
    await bus.close();
    await limits.close();
    await database.close();
  }
}
