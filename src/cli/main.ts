import { parseArgs } from 'node:util';
import { serveUsage, usage } from './usage.ts';

/**
 * The CLI entry. It imports only what parses arguments: each command's modules (the database,
 * Prisma, the domain) load when that command runs, so `--help` and usage errors answer at once.
 */
export async function main(argv: string[]): Promise<number | null> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        help: { type: 'boolean', short: 'h' },
        json: { type: 'boolean' },
        all: { type: 'boolean' },
        subscription: { type: 'boolean' },
        force: { type: 'boolean' },
        to: { type: 'string' },
        'without-pgvector': { type: 'boolean' },
      },
    });
  } catch (e) {
    console.error(`${(e as Error).message}\n\n${usage.main}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  const json = Boolean(values.json);
  const help = (text: string) => {
    console.log(text);
    return 0;
  };
  // Every command is awaited inside the try, so its failure prints as a message, not a stack trace.
  try {
    switch (command) {
      case undefined:
        return help(usage.main);
      case 'serve': {
        if (values.help) return help(await serveUsage());
        await startDatabaseEarly();
        const { serve } = await import('../server.ts');
        await serve();
        return null;
      }
      case 'migrate':
        if (values.help) return help(usage.migrate);
        return await (await import('./commands/migrate.ts')).migrate();
      case 'keys':
        if (values.help || rest[0] !== 'create' || !rest[1]) {
          console[values.help ? 'log' : 'error'](usage.keys);
          return values.help ? 0 : 2;
        }
        return await (await import('./commands/keys.ts')).createKey(rest[1], json);
      case 'creations': {
        const [sub, file] = rest;
        if (values.help || !((sub === 'import' && file) || sub === 'reembed')) {
          console[values.help ? 'log' : 'error'](usage.creations);
          return values.help ? 0 : 2;
        }
        const commands = await import('./commands/creations.ts');
        return await (sub === 'import' ? commands.importFile(file!, json) : commands.reembed(Boolean(values.all)));
      }
      case 'manna': {
        const [sub, username, amount] = rest;
        if (values.help || sub !== 'grant' || !username || !amount) {
          console[values.help ? 'log' : 'error'](usage.manna);
          return values.help ? 0 : 2;
        }
        return await (await import('./commands/manna.ts')).grant(username, amount, values.subscription ? 'subscription' : 'forever', json);
      }
      case 'secrets': {
        const [sub] = rest;
        if (values.help || (sub !== 'reseal' && sub !== 'rotate')) {
          console[values.help ? 'log' : 'error'](usage.secrets);
          return values.help ? 0 : 2;
        }
        return await (await import('./commands/secrets.ts')).secrets(sub, json);
      }
      case 'backup':
      case 'restore': {
        const [file] = rest;
        if (values.help || !file) {
          console[values.help ? 'log' : 'error'](usage[command]);
          return values.help ? 0 : 2;
        }
        if (command === 'backup') return await (await import('./commands/backup.ts')).backup(file, json);
        return await (await import('./commands/restore.ts')).restore(file, Boolean(values.force), json);
      }
      case 'db': {
        if (values.help || rest[0] !== 'copy' || !values.to) {
          console[values.help ? 'log' : 'error'](usage.db);
          return values.help ? 0 : 2;
        }
        const { copy } = await import('./commands/db-copy.ts');
        return await copy(values.to, { force: Boolean(values.force), withoutPgvector: Boolean(values['without-pgvector']), json });
      }
      case 'demo':
        if (values.help) return help(usage.demo);
        return await (await import('./commands/demo.ts')).demo(json);
      default:
        console.error(`Unknown command "${command}".\n\n${usage.main}`);
        return 2;
    }
  } catch (e) {
    const { describeError } = await import('../domain/core/describe-error.ts');
    console.error(describeError(e));
    return 1;
  }
}

/**
 * The embedded database starts (its files copied for a new data directory, PGlite on its thread)
 * while the service's modules load, instead of after them. A configuration that does not load is
 * left to `serve`, which reports it.
 */
async function startDatabaseEarly() {
  const { loadConfig } = await import('../config.ts');
  let database;
  try {
    database = loadConfig().database;
  } catch {
    return;
  }
  if (database.kind === 'pglite' && database.dataDir) await (await import('../db/embedded.ts')).startEarly(database.dataDir);
}
