import { type Config, loadConfig } from '../config.ts';
import { callService, NoServiceError } from '../control/socket.ts';
import { type OperationArgs, type OperationName, type OperationResult, operations } from '../control/operations.ts';
import { liveLockHolder } from '../db/data-dir-lock.ts';
import { type Database, openDatabase } from '../db/database.ts';
import { applyMigrations } from '../db/migrate.ts';
import { httpExecutor } from '../executors/http.ts';
import { guardedFetch } from '../outbound/address-guard.ts';
import { connectorsFor } from '../connectors/index.ts';
import { parseInput } from '../domain/core/validation.ts';
import { deploymentStore } from '../domain/deployments/index.ts';
import { createServices, type Services } from '../domain/services.ts';
import { loadToolRegistry, type ToolRegistry } from '../domain/tools/index.ts';
import { pgBossQueue } from '../jobs/pg-boss.ts';
import { createLimits } from '../limits/index.ts';
import { createMetrics } from '../observability/metrics.ts';
import { chatProviderFor, embeddingProviderFor } from '../providers/index.ts';
import { createEventBus } from '../realtime/index.ts';
import { loadSealer } from '../secrets/keyring.ts';
import { type CliIo, warn } from './io.ts';

const logTo = (io: CliIo) => ({
  error: (obj: unknown, msg?: string) => warn(io, msg, obj),
  warn: (obj: unknown, msg?: string) => warn(io, msg, obj),
});

/**
 * Runs one of the CLI's writing commands. On the embedded database held by a running service,
 * the service runs it (over its command socket, src/control/socket.ts); otherwise this process is
 * the composition root: it opens the configured database (migrated) and runs the command with
 * the domain services over it.
 */
export async function runCommand<N extends OperationName>(
  io: CliIo,
  command: N,
  args: OperationArgs<N>,
  progress: (done: number, total: number) => void = () => {},
): Promise<OperationResult<N>> {
  // Bad arguments are refused before a database is opened or a service asked (each costs seconds).
  parseInput(operations[command].args, args);
  const config = loadConfig(io.env);
  const { database: db } = config;
  if (db.kind === 'pglite' && db.dataDir) {
    const holder = await liveLockHolder(db.dataDir);
    if (holder) {
      try {
        return await callService(db.dataDir, command, args, progress);
      } catch (e) {
        if (!(e instanceof NoServiceError)) throw e;
        throw new Error(
          `The embedded database in ${db.dataDir} is in use by another parley process (pid ${holder}) that takes no commands ` +
            '(another CLI command, or a service started by an older version). Wait for it to finish, or set DATABASE_URL to a PostgreSQL server that several processes can share.',
        );
      }
    }
  }
  const tools = await loadToolRegistry(config.toolsDir);
  const database = await openDatabase(config.database);
  try {
    if (command !== 'migrate') await database.exclusively(() => applyMigrations(database.migrationAdapterFactory));
    return await withServices(
      config,
      database,
      tools,
      logTo(io),
      (services) => operations[command].run({ services, database, progress }, args as never) as Promise<OperationResult<N>>,
    );
  } finally {
    await database.close();
  }
}

/**
 * The domain services over an open database, as a command in this process uses them: on the
 * event bus the configuration names, so what a command publishes (a revoked key, say) reaches
 * every instance when they share Redis. Closed (but not the database) once `work` is done.
 */
export async function withServices<T>(
  config: Config,
  database: Database,
  tools: ToolRegistry,
  log: { error(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void },
  work: (services: Services) => Promise<T>,
): Promise<T> {
  const bus = createEventBus(config);
  // A command streams nothing to clients, so its stream slots need not be shared.
  const limits = createLimits(config.limits, undefined, log);
  // Opened only if the command sends a job (none works any).
  const jobs = pgBossQueue(database.jobs, config.jobs, log);
  try {
    const sealed = await deploymentStore(database.prisma).sealedKeys();
    const deployments = { sealer: await loadSealer(config.secrets, log, sealed), connectors: connectorsFor(config) };
    return await work(
      createServices(database.prisma, tools, {
        config,
        bus,
        streamLimits: limits.streams,
        log,
        metrics: createMetrics(),
        jobs,
        deployments,
        chat: chatProviderFor(config.llm),
        embeddings: embeddingProviderFor(config.search.embeddings),
        toolServices: httpExecutor(guardedFetch(config.outbound)),
      }),
    );
  } finally {
    await jobs.stop(config.shutdownGraceMs);
    await bus.close();
    await limits.close();
  }
}
