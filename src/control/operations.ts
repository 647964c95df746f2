import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { isAbsolute } from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import type { Database } from '../db/database.ts';
import { applyMigrations } from '../db/migrate.ts';
import { upgradeToPgvector } from '../db/vector-column.ts';
import { loadDemo } from '../demo/load.ts';
import { mannaNumber } from '../domain/core/manna.ts';
import { usernameSchema } from '../domain/creators/index.ts';
import { amountSchema } from '../domain/manna/index.ts';
import type { Services } from '../domain/services.ts';

/**
 * The CLI's writing commands as plain functions of the services and JSON arguments, so they run
 * the same way in the CLI's own process (database opened directly) and inside a running service
 * that the CLI asks over its command socket (src/control/socket.ts).
 */
export interface OperationContext {
  services: Services;
  database: Database;
  /** Progress of long commands (lines or creations done, of total). */
  progress(done: number, total: number): void;
}

const operation = <S extends z.ZodType, R>(args: S, run: (ctx: OperationContext, args: z.infer<S>) => Promise<R>) => ({ args, run });

export const operations = {
  'keys.create': operation(z.object({ username: usernameSchema }), async ({ services }, { username }) => {
    const user = await services.creators.ensureUser(username);
    return { userId: user.id, username: user.username, apiKey: (await services.apiKeys.create(user.id)).apiKey };
  }),
  'manna.grant': operation(
    z.object({ username: z.string(), amount: amountSchema, kind: z.enum(['subscription', 'forever']) }),
    async ({ services }, { username, amount, kind }) => {
      const granted = await services.manna.grant(username, amount, kind);
      return {
        ledgerId: granted.ledgerId,
        amount: mannaNumber(granted.amount),
        kind,
        subscriptionBalance: mannaNumber(granted.subscriptionBalance),
        foreverBalance: mannaNumber(granted.foreverBalance),
      };
    },
  ),
  demo: operation(z.object({}), ({ services }) => loadDemo(services)),
  'creations.import': operation(
    z.object({ path: z.string(), total: z.number().int() }),
    async ({ services, progress }, { path, total }) => {
      const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
      let counts = { lines: 0, imported: 0 };
      try {
        const summary = await services.search.importCreations(lines, {
          onProgress: (c) => {
            counts = c;
            progress(c.lines, total);
          },
        });
        return { summary, provider: services.search.provider.name };
      } catch (e) {
        throw new Error(
          `${(e as Error).message}\nStopped after line ${counts.lines}: ${counts.imported} creations imported so far. Run the same command again to resume; lines already imported are skipped.`,
        );
      }
    },
  ),
  'creations.reembed': operation(z.object({ all: z.boolean() }), async ({ services, progress }, { all }) => {
    const result = await services.search.reembed({ all, onProgress: progress });
    return { reembedded: result.reembedded, provider: result.provider };
  }),
  'secrets.reseal': operation(z.object({}), ({ services, progress }) => services.deployments.resealAll(progress)),
  'secrets.rotate': operation(z.object({}), ({ services, progress }) => services.deployments.rotateKey(progress)),
  // `parley backup` while the service runs: only the service may touch its database's files, so it
  // makes the copy the backup is then written from (by the CLI, off the service's threads).
  'backup.copy': operation(z.object({ dir: z.string(), manifest: z.string().optional() }), async ({ database }, { dir, manifest }) => {
    if (!database.copyTo) throw new Error("This service's database is not an embedded one in a data directory: there are no files to copy");
    if (!isAbsolute(dir)) throw new Error(`The copy's directory must be an absolute path, not ${dir}`);
    // A first copy goes into a new directory; a manifest names the copy made there already.
    const exists = await stat(dir).then(
      () => true,
      () => false,
    );
    if (exists !== Boolean(manifest))
      throw new Error(exists ? `${dir} exists already: the copy goes into a new directory` : `${dir} does not exist`);
    const started = performance.now();
    await database.copyTo(dir, manifest);
    return { ms: Math.round(performance.now() - started) };
  }),
  migrate: operation(z.object({}), async ({ database }) => {
    const applied = await database.exclusively(() => applyMigrations(database.migrationAdapterFactory));
    return { newDatabase: Boolean(database.fromSnapshot), applied, pgvector: await upgradeToPgvector(database.prisma) };
  }),
};

export type OperationName = keyof typeof operations;
export type OperationArgs<N extends OperationName> = z.infer<(typeof operations)[N]['args']>;
export type OperationResult<N extends OperationName> = Awaited<ReturnType<(typeof operations)[N]['run']>>;

export const isOperation = (name: unknown): name is OperationName => typeof name === 'string' && Object.hasOwn(operations, name);
