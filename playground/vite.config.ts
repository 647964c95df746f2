import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The playground is served by parley at /playground/ from dist/playground, which `npm install`
// builds (scripts/build.mjs). Everything lands in that folder: no asset from another host, no inline script (the
// page runs under a strict Content-Security-Policy, src/http/playground.ts).
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/playground/',
  logLevel: 'warn',
  build: { outDir: '../dist/playground', emptyOutDir: true, assetsInlineLimit: 0, modulePreload: { polyfill: false } },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
});
