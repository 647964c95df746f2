#!/usr/bin/env node
// The service is TypeScript run through tsx (no build step); this shim registers it.
import { register } from 'tsx/esm/api';

// graphql-js checks every type test against copies of itself from other modules unless told it
// runs in production; the service does, unless the caller says otherwise.
process.env.NODE_ENV ??= 'production';

register();
const { main } = await import('../src/cli/main.ts');
const code = await main(process.argv.slice(2));
// Commands that finish exit at once: Prisma's WebAssembly schema engine leaves a 10 s lock
// timer behind after migrating, which would otherwise keep the process alive.
if (code !== null) process.exit(code);
