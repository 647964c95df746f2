import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';
import { PathOrder } from './test/helpers/path-order.ts';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // graphql ships ESM and CJS builds; Pothos and Yoga load the CJS one, so ours must be the
    // same instance or `instanceof` checks inside graphql fail.
    alias: { graphql: require.resolve('graphql') },
  },
  test: {
    include: ['test/**/*.test.ts'],
    // Servers and CLI commands the tests start as processes run the build in dist/.
    globalSetup: ['test/global-setup.ts'],
    // What each file leaves (server processes, raw sockets) is ended when it ends.
    setupFiles: ['test/helpers/each-file.ts'],
    pool: 'forks',
    // Each file starts its own app and database; two cores, so two files at a time.
    maxWorkers: 2,
    // A worker runs file after file in one process and one module registry: importing the app's
    // modules again for each file took a sixth of a run (more on a busy machine). Each file starts
    // its own app, so what a file changes stays in that app; the one file that changes a module
    // (the GraphQL schema) starts from fresh modules of its own.
    isolate: false,
    // Memory checks collect garbage first, so they measure what is held, not what awaits the GC.
    execArgv: ['--expose-gc'],
    // By path, forward or reversed, when a proof of order asks (scripts/suite-proofs.sh); by
    // vitest's own order (longest first, from the last run) otherwise.
    ...(process.env.TEST_FILE_ORDER ? { sequence: { sequencer: PathOrder } } : {}),
    // expect.poll waits for something another task does (a delivery, a job, a socket's frame);
    // vitest's 1 s default failed working features when the two cores were shared with other
    // work. A poll still fails when what it waits for never comes, well within the test's time.
    expect: { poll: { timeout: 10_000 } },
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
