import SchemaBuilder from '@pothos/core';
import { afterAll } from 'vitest';
import { killChildren } from './process.ts';
import { destroyRawSockets } from './raw-socket.ts';

// Run before every test file (vitest's `setupFiles`). A worker imports a helper once, for the
// first of its files that uses it (`isolate: false`), so a hook the helper registered as it
// was imported would end only that file's children and sockets: a server process a later file
// left to this cleanup outlived the whole run.

// The schema's own Pothos plugins register themselves as their module loads, on the one
// SchemaBuilder of the worker: the sources' modules (the tests' app) and the build's (a command
// run in process, `runCli`) are two modules each, and whichever loaded second was refused
// ("multiple implementations for plugin connectionGuard"), so a command's result hung on which
// files the worker had run before. Each builder takes the plugins of its own modules.
SchemaBuilder.allowPluginReRegistration = true;

afterAll(() => {
  killChildren();
  destroyRawSockets();
});
