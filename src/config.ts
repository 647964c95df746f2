import { resolve } from 'node:path';
import { z } from 'zod';

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://').optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  TOOLS_DIR: z.string().min(1).default('./tools'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type DatabaseConfig =
  | { kind: 'postgres'; url: string }
  /** `dataDir` undefined means an in-memory database (tests). */
  | { kind: 'pglite'; dataDir: string | undefined };

export interface Config {
  port: number;
  host: string;
  database: DatabaseConfig;
  toolsDir: string;
  logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`Invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    database: e.DATABASE_URL ? { kind: 'postgres', url: e.DATABASE_URL } : { kind: 'pglite', dataDir: resolve(e.DATA_DIR) },
    toolsDir: resolve(e.TOOLS_DIR),
    logLevel: e.LOG_LEVEL,
  };
}
