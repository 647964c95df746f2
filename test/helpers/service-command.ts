import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../../bin/parley.js', import.meta.url));

/**
 * The Node flags `bin/parley.js` asks for on its first line (`#!/usr/bin/env -S node …`), which
 * `npm start` and `npx parley` run through. Harnesses that start the service with their own
 * `node` (tests, benchmarks) pass the same flags, so they run it as a user does.
 */
const nodeFlags = (() => {
  const shebang = readFileSync(bin, 'utf8').split('\n', 1)[0]!;
  const words = shebang.split(/\s+/);
  return words.includes('node') ? words.slice(words.indexOf('node') + 1) : [];
})();

/** Arguments for `process.execPath` that run `parley <args>` as `npx parley <args>` does. */
export const parleyArgs = (...args: string[]) => [...nodeFlags, bin, ...args];
