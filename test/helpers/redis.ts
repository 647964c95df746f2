import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, trackChild } from './process.ts';

export interface RedisServer {
  url: string;
  /** A plain client, for a test that looks into Redis itself. */
  client(): Redis;
  stop(): Promise<void>;
}

/**
 * A throwaway redis-server (Debian's `redis-server` package) on a free loopback port, with no
 * persistence; stopped when the test file ends, also after a failure (trackChild).
 */
export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'parley-redis-'));
  const child = trackChild(
    spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  await new Promise<void>((resolve, reject) => {
    child.on('error', (e) => reject(new Error(`redis-server could not start (apt-get install redis-server): ${e.message}`)));
    child.on('exit', (code) => reject(new Error(`redis-server exited with ${code}:\n${output}`)));
    const check = () => (/ready to accept connections/i.test(output) ? resolve() : setTimeout(check, 20));
    check();
  });
  const url = `redis://127.0.0.1:${port}`;
  const clients: Redis[] = [];
  return {
    url,
    client() {
      const c = new Redis(url, { maxRetriesPerRequest: 1 });
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients) c.disconnect();
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
}
