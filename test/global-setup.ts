import { ensureBuilt } from '../scripts/build.mjs';

/** Processes the tests start run dist/: bring it up to date once, before any test file runs. */
export default async function setup() {
  await ensureBuilt();
}
