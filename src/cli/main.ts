import { parseArgs } from 'node:util';
import { type CliIo, processIo, say, warn } from './io.ts';
import { serveUsage, usage } from './usage.ts';

/**
 * The CLI entry. It imports only what parses arguments: each command's modules (the database,
 * Prisma, the domain) load when that command runs, so `--help` and usage errors answer at once.
 */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number | null> {
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
    warn(io, `${(e as Error).message}\n\n${usage.main}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  const json = Boolean(values.json);
  const help = (text: string) => {
    say(io, text);
    return 0;
  };
  /** A command's usage: its answer with --help, an error (exit 2) when its arguments are wrong. */
  const usageOf = (text: string) => {
    if (values.help) return help(text);
    warn(io, text);
    return 2;
  };
  // Every command is awaited inside the try, so its failure prints as a message, not a stack trace.
  try {
    switch (command) {
      case undefined:
        return help(usage.main);
      case 'serve': {
        if (values.help) return help(await serveUsage());
        await startDatabaseEarly(io);
        const { serve } = await import('../server.ts');
        await serve(io.env);
        return null;
      }
      case 'migrate':
        if (values.help) return help(usage.migrate);
        return await (await import('./commands/migrate.ts')).migrate(io);
      case 'keys':
        if (values.help || rest[0] !== 'create' || !rest[1]) return usageOf(usage.keys);
        return await (await import('./commands/keys.ts')).createKey(io, rest[1], json);
      case 'creations': {
        const [sub, file] = rest;
        if (values.help || !((sub === 'import' && file) || sub === 'reembed')) return usageOf(usage.creations);
        const commands = await import('./commands/creations.ts');
        return await (sub === 'import' ? commands.importFile(io, file!, json) : commands.reembed(io, Boolean(values.all)));
      }
      case 'manna': {
        const [sub, username, amount] = rest;
        if (values.help || sub !== 'grant' || !username || !amount) return usageOf(usage.manna);
        const kind = values.subscription ? 'subscription' : 'forever';
        return await (await import('./commands/manna.ts')).grant(io, username, amount, kind, json);
      }
      case 'secrets': {
        const [sub] = rest;
        if (values.help || (sub !== 'reseal' && sub !== 'rotate')) return usageOf(usage.secrets);
        return await (await import('./commands/secrets.ts')).secrets(io, sub, json);
      }
      case 'backup':
      case 'restore': {
        const [file] = rest;
        if (values.help || !file) return usageOf(usage[command]);
        if (command === 'backup') return await (await import('./commands/backup.ts')).backup(io, file, json);
        return await (await import('./commands/restore.ts')).restore(io, file, Boolean(values.force), json);
      }
      case 'db': {
        if (values.help || rest[0] !== 'copy' || !values.to) return usageOf(usage.db);
        const { copy } = await import('./commands/db-copy.ts');
        return await copy(io, values.to, { force: Boolean(values.force), withoutPgvector: Boolean(values['without-pgvector']), json });
      }
      case 'demo':
        if (values.help) return help(usage.demo);
        return await (await import('./commands/demo.ts')).demo(io, json);
      default:
        warn(io, `Unknown command "${command}".\n\n${usage.main}`);
        return 2;
    }
  } catch (e) {
    const { describeError } = await import('../domain/core/describe-error.ts');
    warn(io, describeError(e));
    return 1;
  }
}

/**
 * The embedded database starts (its files copied for a new data directory, PGlite on its thread)
 * while the service's modules load, instead of after them. A configuration that does not load is
 * left to `serve`, which reports it.
 */
async function startDatabaseEarly(io: CliIo) {
  const { loadConfig } = await import('../config.ts');
  let database;
  try {
    database = loadConfig(io.env).database;
  } catch {
    return;
  }
  if (database.kind === 'pglite' && database.dataDir) await (await import('../db/embedded.ts')).startEarly(database.dataDir);
}
