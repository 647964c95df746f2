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
// compiler and are recompiled optimised once they have run enough: a budget of bytes of code,
// each pass through a loop charged the size of its body. PostgreSQL's parser (one 100 KB loop)
// and the query compiler's largest function (136 KB) spent the 18 million this once was within
// the few statements of a start, and recompiling them took CPU the start needed (there are two
// cores). At 180 million (a hundred times Node 20's default, fourteen times Node 24's) they and
// the other functions that run hot are recompiled within the first few hundred statements the
// service runs: a start takes about a sixth less CPU, and streamed replies cost what they did
// (bench/README.md). Set before any WebAssembly is compiled.
setFlagsFromString('--wasm-tiering-budget=180000000');

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
