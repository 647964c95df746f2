// `prisma generate` runs on WebAssembly but the CLI insists on a schema-engine binary path
// before it starts; any existing file satisfies that check, so point it at node itself.
import { spawnSync } from 'node:child_process';

const env = { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath };
const result = spawnSync('npx', ['--no-install', 'prisma', 'generate'], { stdio: 'inherit', env });
process.exit(result.status ?? 1);
