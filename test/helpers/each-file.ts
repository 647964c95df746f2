import { afterAll } from 'vitest';
import { killChildren } from './process.ts';
import { destroyRawSockets } from './raw-socket.ts';

// Run before every test file (vitest's `setupFiles`). A worker imports a helper once, for the
// first of its files that uses it (`isolate: false`), so a hook the helper registered as it
// was imported would end only that file's children and sockets: a server process a later file
// left to this cleanup outlived the whole run.
afterAll(() => {
  killChildren();
  destroyRawSockets();
});
