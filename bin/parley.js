#!/usr/bin/env node
// The service runs as the JavaScript that scripts/build.mjs compiles into dist/; a build made
// from other sources than the current ones is redone first, so this never runs stale code.
import { ensureBuilt } from '../scripts/build.mjs';

// graphql-js checks every type test against copies of itself from other modules unless told it
// runs in production; the service does, unless the caller says otherwise.
process.env.NODE_ENV ??= 'production';

try {
  await ensureBuilt();
} catch (e) {
  console.error(`parley: the build failed: ${e instanceof Error ? e.message : e}`);
  process.exit(1);
}
const { main } = await import('../dist/cli/main.js');
const code = await main(process.argv.slice(2));
// Commands that finish exit at once: Prisma's WebAssembly schema engine leaves a 10 s lock
// timer behind after migrating, which would otherwise keep the process alive.
if (code !== null) process.exit(code);
