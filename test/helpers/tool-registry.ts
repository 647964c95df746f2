import { cp, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toolsDir } from './app.ts';

/** The repository's tools plus extra tool files (YAML text by key), in a folder of their own. */
export async function toolRegistryWith(extra: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'parley-tools-'));
  await cp(toolsDir, dir, { recursive: true });
  for (const [key, yaml] of Object.entries(extra)) await writeFile(join(dir, `${key}.yaml`), yaml);
  return dir;
}

/** A tool served over HTTP at `url`, costing `cost` (an expression over `n`, default 1). */
export const httpTool = (key: string, url: string, cost = 'n', options: { timeoutMs?: number; retries?: number } = {}) => `key: ${key}
name: ${key}
description: A test tool served elsewhere; it makes an image when asked.
output_type: image
active: true
visible: true
order: 500
cost_estimate: "${cost}"
parameters:
  - name: prompt
    type: string
    description: What to make.
    required: true
  - name: n
    type: integer
    description: How many.
    default: 1
    min: 1
    max: 3
handler:
  http: ${url}
  timeout_ms: ${options.timeoutMs ?? 5000}
  retries: ${options.retries ?? 2}
`;
