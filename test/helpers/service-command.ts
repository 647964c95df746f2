import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The repository's root (with a trailing slash): where `npm start` runs. */
export const root = fileURLToPath(new URL('../..', import.meta.url));
/** The CLI, as `npx parley` runs it. */
export const parleyBin = `${root}bin/parley.js`;

/**
 * The Node flags `npm start` gives (`node <flags> bin/parley.js serve` in package.json).
 * Harnesses that start the service with their own `node` (tests, benchmarks) pass the same
 * flags, so they run it as a user does.
 */
export const startFlags: readonly string[] = (() => {
  const { scripts } = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { scripts: { start: string } };
  const words = scripts.start.split(/\s+/);
  if (words[0] !== 'node' || !words.includes('bin/parley.js')) throw new Error(`npm start is not node … bin/parley.js: ${scripts.start}`);
  return words.slice(1, words.indexOf('bin/parley.js'));
})();

/** Arguments for `process.execPath` that start the service as `npm start` does. */
export const serveArgs = () => [...startFlags, parleyBin, 'serve'];
