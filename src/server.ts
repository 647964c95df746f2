import { readFile } from 'node:fs/promises';
import { buildApp } from './app.ts';
import { loadConfig } from './config.ts';
import { hidePasswords } from './passwords.ts';

/** Which code runs: the build's record (scripts/build.mjs writes it beside the compiled server). */
async function describeBuild() {
  const info = await readFile(new URL('./build.json', import.meta.url), 'utf8').then(
    (text) => JSON.parse(text) as { code: string; builtAt: string },
    () => null,
  );
  return info ? `dist/ built ${info.builtAt} from sources ${info.code.slice(0, 12)}` : 'the TypeScript sources (no build)';
}

/** Starts the service; SIGTERM/SIGINT close it cleanly (in-flight requests finish first). */
export async function serve(env: NodeJS.ProcessEnv = process.env) {
  const config = loadConfig(env);
  const app = await buildApp(config);
  // Before listening: a signal that comes as soon as the service is reachable must find the
  // handlers in place, or it would end the process without closing anything.
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    console.log(`${signal} received: closing`);
    try {
      await app.close();
      process.exit(0);
    } catch (e) {
      console.error('error while closing', e);
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  const address = await app.listen({ port: config.port, host: config.host });
  const search = await app.services.search.describe();
  const events = await app.services.bus.describe();
  console.log(
    `parley listening on ${address} (GraphQL and graphql-ws at /graphql, REST at /v2 and /apikeys)\ndatabase: ${app.database.description}\n` +
      `replies: ${app.services.provider.description}\nevents: ${events.events}\nsearch: ${search.storage}\nembeddings: ${search.embeddings}\ncode: ${await describeBuild()}`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  serve().catch((e) => {
    console.error(hidePasswords(e instanceof Error ? e.message : String(e)));
    process.exit(1);
  });
}
