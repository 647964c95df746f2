import { resolve } from 'node:path';
import { z } from 'zod';

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://').optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  TOOLS_DIR: z.string().min(1).default('./tools'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  EMBEDDINGS_URL: z.string().url('must be a URL such as http://127.0.0.1:7997/v1').optional(),
  EMBEDDINGS_MODEL: z.string().min(1).optional(),
  EMBEDDINGS_API_KEY: z.string().min(1).optional(),
  EMBEDDINGS_BATCH_SIZE: z.coerce.number().int().min(1).max(2048).default(32),
  EMBEDDINGS_TIMEOUT_MS: z.coerce.number().int().min(1).default(30_000),
  EMBEDDINGS_RETRIES: z.coerce.number().int().min(0).max(10).default(3),
  SEARCH_MIN_SCORE: z.coerce.number().min(-1).max(1).optional(),
  SEARCH_MAX_RESULTS: z.coerce.number().int().min(1).max(10_000).default(200),
  SEARCH_EF_SEARCH: z.coerce.number().int().min(1).max(1000).default(200),
}).refine((e) => !e.EMBEDDINGS_URL || e.EMBEDDINGS_MODEL, { path: ['EMBEDDINGS_MODEL'], message: 'is required with EMBEDDINGS_URL' });

export type DatabaseConfig =
  | { kind: 'postgres'; url: string }
  /** `dataDir` undefined means an in-memory database (tests). */
  | { kind: 'pglite'; dataDir: string | undefined };

export type EmbeddingsConfig =
  | { kind: 'hashed-ngrams' }
  | { kind: 'http'; url: string; model: string; apiKey?: string; batchSize: number; timeoutMs: number; retries: number };

export interface SearchConfig {
  embeddings: EmbeddingsConfig;
  /** Cosine similarity a match needs; unset: the provider's default. */
  minScore?: number;
  /** At most this many nearest creations are ranked per query (the top-K window). */
  maxResults: number;
  /** `hnsw.ef_search` for search queries (pgvector's default is 40). */
  efSearch: number;
}

export interface Config {
  port: number;
  host: string;
  database: DatabaseConfig;
  toolsDir: string;
  logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
  /** Unset: the built-in offline embeddings and default search settings. */
  search?: SearchConfig;
}

export const defaultSearchConfig: SearchConfig = { embeddings: { kind: 'hashed-ngrams' }, maxResults: 200, efSearch: 200 };

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
    search: {
      embeddings: e.EMBEDDINGS_URL
        ? {
            kind: 'http',
            url: e.EMBEDDINGS_URL,
            model: e.EMBEDDINGS_MODEL!,
            apiKey: e.EMBEDDINGS_API_KEY,
            batchSize: e.EMBEDDINGS_BATCH_SIZE,
            timeoutMs: e.EMBEDDINGS_TIMEOUT_MS,
            retries: e.EMBEDDINGS_RETRIES,
          }
        : { kind: 'hashed-ngrams' },
      minScore: e.SEARCH_MIN_SCORE,
      maxResults: e.SEARCH_MAX_RESULTS,
      efSearch: e.SEARCH_EF_SEARCH,
    },
  };
}
