#!/usr/bin/env node
// `npm start` runs this file as `node --max-semi-space-size=32 bin/parley.js serve`: twice V8's
// default room for short-lived objects, which halves the young collections under many streams
// (docs/decisions.md). It has to be given to node: V8 sizes its heap before any of this runs.
// The flag stays out of the line above, whose `env -S` not every system's env understands.

// The service runs as the JavaScript that scripts/build.mjs compiles into dist/; a build made
// from other sources than the current ones is redone first, so this never runs stale code.
import { setFlagsFromString } from 'node:v8';
import { ensureBuilt } from '../scripts/build.mjs';

// WebAssembly functions (PGlite's PostgreSQL, Prisma's query compiler) start on V8's baseline
// compiler and are recompiled optimised once they have run enough. At the default threshold
// that happens to much of PGlite while it starts, which delays its first answers by a few
// hundred milliseconds; ten times the threshold leaves that to the functions that stay hot
// (bench/README.md has the measurements). Set before any WebAssembly is compiled.
setFlagsFromString('--wasm-tiering-budget=18000000');

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
