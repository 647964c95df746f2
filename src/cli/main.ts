import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { applyMigrations } from '../db/migrate.ts';
import { loadDemo } from '../demo/load.ts';
import { isDomainError } from '../domain/errors.ts';
import { describeInputError } from '../domain/validation.ts';
import { createServices } from '../domain/services.ts';
import { loadToolRegistry } from '../domain/tools/registry.ts';
import { serve } from '../server.ts';

const usage = {
  main: `Usage: parley <command> [options]

Commands:
  serve                      start the service (same as npm start)
  migrate                    apply database migrations and exit
  keys create <username>     create the user if missing and print a new API key (shown once)
  demo                       load the demo data set (idempotent) and print its manifest

Run "parley <command> --help" for a command's options. Configuration comes from the
environment: DATABASE_URL (else embedded PGlite in DATA_DIR, default ./data), PORT, HOST.`,
  serve: `Usage: parley serve\n\nStarts the service on HOST:PORT (default 127.0.0.1:4000), applying migrations first.`,
  migrate: `Usage: parley migrate\n\nApplies pending migrations from prisma/migrations to the configured database and exits.`,
  keys: `Usage: parley keys create <username> [--json]\n\nCreates <username> if it does not exist and prints a new API key for it.\nThe key is shown only this once; only its hash is stored.\n\n  --json   print {"userId","username","apiKey"} as JSON`,
  demo: `Usage: parley demo [--json]\n\nLoads the demo data set (users alice and bob, agents, deployments, triggers, a concept,\nmodels, 240 creations, sessions and shares). Running it again adds nothing twice.\nA fresh API key for each demo user is printed on every run.\n\n  --json   print the manifest as one JSON object on stdout`,
};

async function withServices<T>(run: (services: ReturnType<typeof createServices>) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const tools = await loadToolRegistry(config.toolsDir);
  const database = await openDatabase(config.database);
  try {
    await applyMigrations(database.migrationAdapterFactory);
    return await run(createServices(database.prisma, tools));
  } finally {
    await database.close();
  }
}

/** Returns the exit code, or null while the service keeps running (`serve`). */
export async function main(argv: string[]): Promise<number | null> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { help: { type: 'boolean', short: 'h' }, json: { type: 'boolean' } } });
  } catch (e) {
    console.error(`${(e as Error).message}\n\n${usage.main}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  const help = (text: string) => {
    console.log(text);
    return 0;
  };
  try {
    switch (command) {
      case undefined:
        return help(usage.main);
      case 'serve':
        if (values.help) return help(usage.serve);
        await serve();
        return null;
      case 'migrate': {
        if (values.help) return help(usage.migrate);
        const config = loadConfig();
        const database = await openDatabase(config.database);
        try {
          const applied = await applyMigrations(database.migrationAdapterFactory);
          console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
        } finally {
          await database.close();
        }
        return 0;
      }
      case 'keys': {
        if (values.help || rest[0] !== 'create' || !rest[1]) {
          console[values.help ? 'log' : 'error'](usage.keys);
          return values.help ? 0 : 2;
        }
        const created = await withServices(async (s) => {
          const user = await s.creators.ensureUser(rest[1]!);
          return { userId: user.id, username: user.username, apiKey: (await s.apiKeys.create(user.id)).apiKey };
        });
        console.log(values.json ? JSON.stringify(created) : `API key for ${created.username} (shown once, store it now):\n${created.apiKey}`);
        return 0;
      }
      case 'demo': {
        if (values.help) return help(usage.demo);
        const manifest = await withServices((s) => loadDemo(s));
        if (values.json) console.log(JSON.stringify(manifest));
        else {
          console.log('Demo data loaded. API keys (shown once):');
          for (const u of manifest.users) console.log(`  ${u.username}: ${u.apiKey}`);
          console.log(`${manifest.agents.length} agents, ${manifest.creations.length} creations, ${manifest.sessions.length} sessions, ${manifest.shares.length} shares.`);
        }
        return 0;
      }
      default:
        console.error(`Unknown command "${command}".\n\n${usage.main}`);
        return 2;
    }
  } catch (e) {
    console.error(isDomainError(e) ? describeInputError(e.message, e.fieldPath) : e instanceof Error ? e.message : e);
    return 1;
  }
}
