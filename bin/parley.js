#!/usr/bin/env -S node --max-semi-space-size=32
// Node's flags on the line above (npm start and npx parley run this file through it):
// --max-semi-space-size=32 gives V8's young generation twice its default room. A streaming reply
// keeps a few promises and buffers alive from one token to the next, about 50 ms apart; with the
// default 16 MB, young collections came every 40 ms under 1,000 streams, so those objects
// outlived one and were copied. Twice the room halves the collections; more would hold more
// memory per idle subscription (docs/decisions.md). It has to be a flag: V8 sizes its heap once,
// before any of this file runs.

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
