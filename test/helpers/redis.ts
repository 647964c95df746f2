import { Redis } from 'ioredis';
import { trackChild } from './process.ts';
import { startRedisServer } from './servers.ts';

export interface RedisServer {
  url: string;
  /** A plain client, for a test that looks into Redis itself. */
  client(): Redis;
  stop(): Promise<void>;
}

/** A throwaway redis-server, killed when the test file ends, also after a failure (trackChild). */
export async function startRedis(): Promise<RedisServer> {
  const server = await startRedisServer();
  trackChild(server.child);
  const clients: Redis[] = [];
  return {
    url: server.url,
    client() {
      const c = new Redis(server.url, { maxRetriesPerRequest: 1 });
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients) c.disconnect();
      server.stop();
    },
  };
}
