#!/usr/bin/env node
// The service is TypeScript run through tsx (no build step); this shim registers it.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
